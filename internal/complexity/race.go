//go:build race

package complexity

// raceDetector is set in a build with the race detector (race.go,
// norace.go).
const raceDetector = true
