//go:build race

package receipt

// raceDetector trims slow, single-goroutine corpus tests under -race, where
// they find nothing more and take minutes.
const raceDetector = true
