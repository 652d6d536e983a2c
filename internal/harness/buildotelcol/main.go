// Command buildotelcol builds (or finds cached) the OpenTelemetry Collector
// the export tests run (tools/otelcol) and prints its path. scripts/ci-deps.sh
// runs it, so the cold build happens once, before `make test`.
package main

import (
	"fmt"
	"os"

	"github.com/termd/termd/internal/harness"
)

func main() {
	bin, err := harness.BuildOtelcol()
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildotelcol:", err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
