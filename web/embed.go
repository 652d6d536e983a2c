// Package web holds the termd web console: plain ES modules and CSS with no
// build step, embedded into termd-gateway so it works with no network.
package web

import "embed"

// Console is the console's files under "console/".
//
//go:embed console
var Console embed.FS
