package policy

import (
	"errors"
	"fmt"
)

func errf(f string, a ...any) error { return errors.New(fmt.Sprintf(f, a...)) }

// parseCommand parses argv (argv[0] is the program base name) with the
// tool grammar. ok=false when the tool has no grammar.
func parseCommand(argv []string) (*parsed, bool, error) {
	if len(argv) == 0 {
		return nil, false, errf("empty argv")
	}
	tool := baseName(argv[0])
	spec, ok := toolSpecs()[tool]
	if !ok {
		return &parsed{tool: tool, unparsed: true}, false, nil
	}
	args := argv[1:]
	if tool == "tar" {
		args = tarOldStyle(spec, args)
	}
	p, err := parseArgs(tool, spec, args)
	return p, true, err
}
