package main

import (
	"net/http"
	"os"
)

func main() {
	addr := ":" + os.Getenv("SHOP_PORT")
	_ = http.ListenAndServe(addr, nil)
}
