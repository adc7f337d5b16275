//go:build race

package mxfp8

// raceEnabled thins exhaustive loops under the race detector, which makes
// every memory access several times slower.
const raceEnabled = true
