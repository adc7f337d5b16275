//go:build race

package fp8

// raceEnabled thins exhaustive loops under the race detector, which makes
// every memory access several times slower.
const raceEnabled = true
