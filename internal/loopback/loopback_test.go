package loopback

import "testing"

func TestListen(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8765": true, "127.9.9.9:1": true, "[::1]:80": true, "localhost:9464": true, "LocalHost:1": true,
		":8765": false, "0.0.0.0:80": false, "[::]:80": false, "10.0.0.1:80": false, "example.com:80": false,
		"localhost.example.com:80": false,
	} {
		got, err := Listen(addr)
		if err != nil || got != want {
			t.Errorf("Listen(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	if _, err := Listen("127.0.0.1"); err == nil {
		t.Error("an address without a port is an error")
	}
}
