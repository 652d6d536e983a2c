//go:build race

package receiptstore

// raceDetector shrinks the crash tests' chains under -race, where signing
// and verifying are several times slower and find nothing more.
const raceDetector = true
