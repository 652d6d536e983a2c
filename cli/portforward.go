package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/termd/termd/client"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newPortForward(a *app) *cobra.Command {
	var list bool
	var closeID string
	cmd := &cobra.Command{
		Use:   "port-forward EXECUTION|SESSION [LOCAL:]REMOTE",
		Short: "Reach a server in a workspace loopback from this host (127.0.0.1:LOCAL)",
		Long: `Commands on network workspace-loopback (the default for offline work) share a
loopback per principal and workspace: a dev server one of them starts answers the
next at 127.0.0.1:PORT, and nothing outside can reach it. port-forward makes termd
listen on 127.0.0.1:LOCAL on this host (only loopback) and carry each connection to
127.0.0.1:REMOTE inside the loopback of EXECUTION (its requester, its workspace),
or of SESSION's latest execution on one, for as long as this command runs: Ctrl-C
closes the port. LOCAL defaults to REMOTE; 0 picks a free port. Agents forward into
their own loopbacks; operators list and close every forward (see docs/SANDBOX.md).`,
		Example: `  termctl port-forward 3f1c9e2a-... 8000          # http://127.0.0.1:8000 on the host
  termctl port-forward 3f1c9e2a-... 0:5173        # a free host port
  termctl port-forward --list
  termctl port-forward --close pf-3f1c9e2a-41b7`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			switch {
			case list && closeID != "":
				return usageErr(errors.New("give --list or --close, not both"))
			case list || closeID != "":
				if len(args) > 0 {
					return usageErr(errors.New("--list and --close take no EXECUTION or port"))
				}
				if list {
					return a.listForwards(ctx, c)
				}
				resp, err := c.Forwards.ClosePortForward(ctx, &termdv1.ClosePortForwardRequest{ForwardId: closeID})
				if err != nil {
					return fmt.Errorf("closing port forward %s: %w", closeID, err)
				}
				if ok, err := a.printData(resp); ok {
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "closed %s (%s -> 127.0.0.1:%d in %s's loopback)\n", closeID, resp.Forward.GetLocalAddress(), resp.Forward.GetRemotePort(), resp.Forward.GetPrincipal())
				return err
			}
			if len(args) != 2 {
				return usageErr(errors.New("give EXECUTION (or SESSION) and [LOCAL:]REMOTE, e.g. `termctl port-forward EXEC_ID 8000`; --list shows open forwards"))
			}
			local, remote, err := parseForwardPorts(args[1])
			if err != nil {
				return usageErr(err)
			}
			return a.portForward(ctx, c, args[0], local, remote)
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "list the open forwards (yours; an operator sees all)")
	cmd.Flags().StringVar(&closeID, "close", "", "close the forward `ID` (yours; an operator may close any)")
	return cmd
}

// parseForwardPorts reads [LOCAL:]REMOTE.
func parseForwardPorts(s string) (local, remote uint32, err error) {
	l, r, two := strings.Cut(s, ":")
	if !two {
		r = l
	}
	port := func(what, v string, zero bool) (uint32, error) {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil || (n == 0 && !zero) {
			return 0, fmt.Errorf("%s port %q: give a number from 1 to 65535%s", what, v, map[bool]string{true: " (or 0 for a free one)"}[zero])
		}
		return uint32(n), nil
	}
	if remote, err = port("remote", r, false); err != nil {
		return 0, 0, err
	}
	if local, err = port("local", l, true); err != nil {
		return 0, 0, err
	}
	return local, remote, nil
}

// portForward holds a forward open until Ctrl-C (or until an operator closes it).
func (a *app) portForward(ctx context.Context, c *client.Client, target string, local, remote uint32) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	open := func(req *termdv1.PortForwardRequest) (termdv1.PortForwardService_PortForwardClient, *termdv1.PortForward, error) {
		st, err := c.Forwards.PortForward(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		first, err := st.Recv()
		if err != nil {
			return nil, nil, err
		}
		return st, first.GetForward(), nil
	}
	st, f, err := open(&termdv1.PortForwardRequest{ExecutionId: target, RemotePort: remote, LocalPort: local})
	if status.Code(err) == codes.NotFound {
		// Not an execution: a session?
		if st2, f2, err2 := open(&termdv1.PortForwardRequest{SessionId: target, RemotePort: remote, LocalPort: local}); status.Code(err2) != codes.NotFound {
			st, f, err = st2, f2, err2
		}
	}
	if err != nil {
		return fmt.Errorf("port-forward %s: %w", target, err)
	}
	if a.output != "table" {
		if _, err := a.printData(f); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "forwarding http://%s -> 127.0.0.1:%d in the workspace loopback of %s (%s)\nforward %s; Ctrl-C closes it\n",
			f.GetLocalAddress(), f.GetRemotePort(), f.GetPrincipal(), f.GetWorkspace(), f.GetId())
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C: the port closes with the call
			}
			return fmt.Errorf("port forward %s ended: %w", f.GetId(), err)
		}
		if why := resp.GetForward().GetClosed(); why != "" {
			return fmt.Errorf("port forward %s was closed: %s", f.GetId(), why)
		}
	}
}

func (a *app) listForwards(ctx context.Context, c *client.Client) error {
	resp, err := c.Forwards.ListPortForwards(ctx, &termdv1.ListPortForwardsRequest{})
	if err != nil {
		return fmt.Errorf("listing port forwards: %w", err)
	}
	if ok, err := a.printData(resp); ok {
		return err
	}
	return listTable(a.stdout, resp.Forwards, "no open port forwards", []string{"FORWARD", "HOST", "REMOTE", "LOOPBACK OF", "WORKSPACE", "BY", "OPENED", "CONNECTIONS"}, func(f *termdv1.PortForward) []string {
		return []string{f.Id, f.LocalAddress, strconv.Itoa(int(f.RemotePort)), f.Principal, f.Workspace, principalWord(f.OpenedBy), fmtTime(f.OpenedAt), fmt.Sprintf("%d (%d open)", f.Connections, f.OpenConnections)}
	})
}
