// Command gen writes docs/CONFIG.md from the Config struct's tags:
//
//	go run ./daemon/config/gen          # or: make docs
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/termd/termd/daemon/config"
)

func main() {
	out := flag.String("o", "docs/CONFIG.md", "output file")
	flag.Parse()
	if err := os.WriteFile(*out, []byte(config.Markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
