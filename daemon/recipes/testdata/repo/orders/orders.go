// Package orders parses order lines.
package orders

import (
	"fmt"
	"strconv"
	"strings"
)

// Order is one parsed line.
type Order struct {
	SKU string
	Qty int
}

// Parse reads "SKU x QTY".
func Parse(line string) (Order, error) {
	sku, qty, ok := strings.Cut(line, " x ")
	if !ok {
		return Order{}, fmt.Errorf("order %q: want SKU x QTY", line)
	}
	n, err := strconv.Atoi(qty)
	if err != nil {
		return Order{}, err
	}
	return Order{SKU: sku, Qty: n}, nil
}
