package hostfs

// PrivatePaths are the operator socket and the files and directories the
// config names private (private_paths: the gateway's token file, logs, the
// directory of `make run`): hidden from every execution like termd's own
// state, and refused by the policy.
func (h *FS) PrivatePaths() []string {
	cfg := h.Config()
	var p []string
	if cfg.OperatorSocket != "" {
		p = append(p, cfg.OperatorSocket)
	}
	return append(p, cfg.PrivatePaths...)
}
