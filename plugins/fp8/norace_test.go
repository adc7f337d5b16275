//go:build !race

package fp8

const raceEnabled = false
