// Package legacy still imports a package that was removed: it no longer
// builds, which discover-go-tests reports.
package legacy

import "example.com/shop/billing"

// Charge forwards to the removed billing package.
func Charge(cents int) error { return billing.Charge(cents) }
