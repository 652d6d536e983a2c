package policy

// diffPairReads: diff DIR FILE compares DIR/basename(FILE), so that file is
// read too (also with --from-file / --to-file; git diff outside a work tree
// does the same). dir is where the command works.
func diffPairReads(pc *parsed, dir string) []string {
	var out []string
	var pairs [][2]string
	from, to := pc.values("--from-file"), pc.values("--to-file")
	for _, op := range pc.operands {
		for _, f := range from {
			pairs = append(pairs, [2]string{f, op.value})
		}
		for _, t := range to {
			pairs = append(pairs, [2]string{op.value, t})
		}
	}
	if len(from) == 0 && len(to) == 0 && len(pc.operands) == 2 {
		pairs = append(pairs, [2]string{pc.operands[0].value, pc.operands[1].value})
	}
	for _, pr := range pairs {
		a, b := resolvePath(dir, pr[0]), resolvePath(dir, pr[1])
		if da, db := isDir(a), isDir(b); da != db {
			d, file := a, pr[1]
			if db {
				d, file = b, pr[0]
			}
			out = append(out, d+"/"+baseName(file))
		}
	}
	return out
}
