//go:build !race

package complexity

const raceDetector = false
