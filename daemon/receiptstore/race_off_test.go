//go:build !race

package receiptstore

const raceDetector = false
