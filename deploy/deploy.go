// Package deploy holds termd's service definitions (systemd units, launchd
// property lists); scripts/install.sh installs them. Its tests install into a
// temporary prefix, verify the units, and exercise socket activation and
// graceful stop against the real binaries.
package deploy
