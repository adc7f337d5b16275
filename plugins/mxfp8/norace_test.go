//go:build !race

package mxfp8

const raceEnabled = false
