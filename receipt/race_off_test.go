//go:build !race

package receipt

const raceDetector = false
