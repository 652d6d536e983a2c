package policy

import (
	"errors"
	"fmt"
)

func errf(f string, a ...any) error { return errors.New(fmt.Sprintf(f, a...)) }
