package cli

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"drover/internal/agent/catalog"
	"drover/internal/buildinfo"
	"drover/internal/runner"
)

// serviceFlags are the flags of `runner service install` and `hub service
// install`.
type serviceFlags struct {
	user    bool   // a systemd user unit, not a system one
	print   bool   // to stdout, nothing written
	unitDir string // where the unit goes (default: systemd's directory)
	as      string // User= of a system unit
}

func (f *serviceFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.user, "user", false, "a systemd user unit (~/.config/systemd/user), run by your user manager, instead of a system unit")
	fl.BoolVar(&f.print, "print", false, "print the unit on stdout and write nothing")
	fl.StringVar(&f.unitDir, "unit-dir", "", "directory to write the unit to (default /etc/systemd/system, with --user $XDG_CONFIG_HOME/systemd/user)")
	fl.StringVar(&f.as, "as", "", "the user a system unit runs as (default: $SUDO_USER, else you)")
}

// unit is a systemd service drover writes.
type unit struct {
	name        string // file name, e.g. drover-runner.service
	command     string // runner or hub
	description string
	exec        []string
	env         []string // NAME=value
	// writable are the only paths the service may write outside its
	// private /tmp; reads are the paths it must still read (PATH entries).
	writable, reads []string
	// runner: the service starts bubblewrap sandboxes, which need user
	// namespaces and a fresh /proc, so it gets none of the hardening that
	// forbids them (RestrictNamespaces, ProtectKernelTunables and the
	// like, whose masked /proc makes the kernel refuse a new one).
	runner bool
	// stopTimeout covers a graceful stop (agents' grace, output sent).
	stopTimeout string
}

// render is the unit file: a system unit (runAs its User=) or, with
// userUnit, a user unit.
func (u unit) render(userUnit bool, runAs string) string {
	var b strings.Builder
	// fprintf: whatever a path holds, the unit shows no control character.
	line := func(format string, args ...any) { fprintf(&b, format+"\n", args...) }
	line("# Written by drover %s (drover %s service install); edit the command, not the hardening, unless you know why.", buildinfo.Version(), u.command)
	line("[Unit]")
	line("Description=%s", u.description)
	line("After=network-online.target")
	line("Wants=network-online.target")
	line("")
	line("[Service]")
	line("Type=exec")
	if !userUnit {
		line("User=%s", unitEscape(runAs))
	}
	args := make([]string, len(u.exec))
	for i, a := range u.exec {
		args[i] = unitQuote(a)
	}
	line("ExecStart=%s", strings.Join(args, " "))
	for _, e := range u.env {
		line("Environment=%s", unitQuote(e))
	}
	// on-failure: an ephemeral or draining runner that exits 0 is done.
	line("Restart=on-failure")
	line("RestartSec=5s")
	// A runner the hub refused, revoked or replaced exits 3: starting it
	// again every few seconds would only be refused again.
	line("RestartPreventExitStatus=%d", exitRunnerEnded)
	// SIGTERM to drover alone, which stops its agents with their grace
	// and sends their output; SIGKILL to everything left at the timeout.
	line("KillMode=mixed")
	line("TimeoutStopSec=%s", u.stopTimeout)
	line("LimitNOFILE=65536")
	line("NoNewPrivileges=yes")
	if userUnit {
		// A user manager would need a user namespace of its own for the
		// file-system protections below, wrapping the sandboxes' own.
		line("# ProtectSystem/ProtectHome are system-unit only: a user manager needs a user namespace of its own for them.")
	} else {
		line("ProtectSystem=strict")
		line("ProtectHome=%s", protectHome(append(u.writable, u.reads...)))
		for _, w := range u.writable {
			line("ReadWritePaths=%s", unitQuote(w))
		}
		if !under(u.writable, "/tmp", "/var/tmp") {
			line("PrivateTmp=yes") // a private /tmp would hide a writable path there
		}
		line("RestrictSUIDSGID=yes")
		line("LockPersonality=yes")
		line("ProtectClock=yes")
		line("ProtectKernelModules=yes")
		if !u.runner {
			line("PrivateDevices=yes")
			line("ProtectKernelTunables=yes")
			line("ProtectControlGroups=yes")
			line("RestrictNamespaces=yes")
			line("RestrictRealtime=yes")
			line("SystemCallArchitectures=native")
		}
	}
	line("")
	line("[Install]")
	if userUnit {
		line("WantedBy=default.target")
	} else {
		line("WantedBy=multi-user.target")
	}
	return b.String()
}

// protectHome hides /home, /root and /run/user unless the service must
// reach a path there: then they are read-only, with ReadWritePaths
// writable.
func protectHome(paths []string) string {
	if under(paths, "/home", "/root", "/run/user") {
		return "read-only"
	}
	return "yes"
}

// under reports whether one of paths is one of dirs or inside one.
func under(paths []string, dirs ...string) bool {
	for _, p := range paths {
		for _, d := range dirs {
			if p == d || strings.HasPrefix(p, d+"/") {
				return true
			}
		}
	}
	return false
}

// unitQuote quotes one word of ExecStart or an assignment for systemd: in
// double quotes when it needs them, with '%' and '$' doubled so that
// systemd expands neither specifiers nor variables.
func unitQuote(s string) string {
	s = unitEscape(s)
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func unitEscape(s string) string { return strings.NewReplacer("%", "%%", "$", "$$").Replace(s) }

// install writes u (or prints it with --print) and says how to start it.
func (a *app) installService(f serviceFlags, u unit) error {
	for _, s := range append(append(u.exec, u.env...), f.as, f.unitDir) {
		if strings.ContainsAny(s, "\n\r\x00") {
			return usagef("%q: a unit cannot hold a newline or NUL", s)
		}
	}
	runAs := f.as
	if !f.user && runAs == "" {
		runAs = a.env.Getenv("SUDO_USER")
		if runAs == "" {
			me, err := user.Current()
			if err != nil {
				return fmt.Errorf("find your user name (pass --as USER): %w", err)
			}
			runAs = me.Username
		}
	}
	if f.user && f.as != "" {
		return usagef("--as is for a system unit; a user unit runs as you")
	}
	text := u.render(f.user, runAs)
	if f.print {
		_, err := io.WriteString(a.env.Stdout, text) // made safe by render
		return err
	}
	dir := f.unitDir
	if dir == "" {
		if f.user {
			cfg, err := a.xdg("XDG_CONFIG_HOME", ".config")
			if err != nil {
				return err
			}
			dir = filepath.Join(filepath.Dir(cfg), "systemd", "user")
		} else {
			dir = "/etc/systemd/system"
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create the unit directory (for a system unit run it with sudo, or pass --user or --print): %w", err)
	}
	path := filepath.Join(dir, u.name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write the unit (for a system unit run it with sudo, or pass --user or --print): %w", err)
	}
	ctl := "sudo systemctl"
	if f.user {
		ctl = "systemctl --user"
	}
	fprintf(a.env.Stdout, "wrote %s\nstart it now and at every boot:\n  %s daemon-reload\n  %s enable --now %s\n", path, ctl, ctl, u.name)
	if f.user {
		fprintf(a.env.Stdout, "keep it running while you are logged out:\n  loginctl enable-linger %s\n", a.env.Getenv("USER"))
	}
	fprintf(a.env.Stdout, "follow its log:\n  %s status %s; journalctl %s-u %s -f\n", ctl, u.name, map[bool]string{true: "--user ", false: ""}[f.user], u.name)
	return nil
}

// executable is this drover binary's absolute path, for ExecStart.
func executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the drover binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", fmt.Errorf("find the drover binary: %w", err)
	}
	return exe, nil
}

// serviceDir checks that the command's own flags come after "--" and
// returns the service's directory (dir, else its default) made absolute.
func serviceDir(cmd *cobra.Command, args []string, dir string, def func() (string, error), what, example string) (string, error) {
	if n := cmd.ArgsLenAtDash(); n > 0 || (n < 0 && len(args) > 0) {
		return "", usagef("%s flags go after '--', e.g. drover %s service install -- %s", what, what, example)
	}
	var err error
	if dir == "" {
		if dir, err = def(); err != nil {
			return "", err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", fmt.Errorf("%s directory: %w", what, err)
	}
	return dir, nil
}

// serviceCmd is the `service` command of `runner` or `hub`, with install.
func serviceCmd(what string, install *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "service",
		Short: "Run the " + what + " as a systemd service",
		Args:  noArgs,
		RunE:  showHelp,
	}
	cmd.AddCommand(install)
	return cmd
}

func (a *app) runnerServiceCmd() *cobra.Command {
	var f serviceFlags
	var home string
	install := &cobra.Command{
		Use:   "install [--user] [--print] [--home DIR] [--as USER] [--unit-dir DIR] [-- RUNNER FLAGS...]",
		Short: "Write a systemd unit that runs this runner, hardened, and say how to enable it",
		Long: `Write drover-runner.service: 'drover runner --home HOME' with the flags after
'--' (e.g. -- --slots 4 --labels gpu=1), restarted on failure (not after an
exit 0 of --max-jobs, --idle-timeout or --drain), stopped gracefully, with
NoNewPrivileges, a read-only system, /home read-only or hidden, and only the
runner's home writable. It keeps what bubblewrap needs (user namespaces, a
fresh /proc). The runner must be logged in first ('drover runner login').
PATH and the vendor endpoint variables in your environment go into the unit,
so the service finds the same agent CLIs.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := serviceDir(cmd, args, home, a.runnerHome, "runner", "--slots 4")
			if err != nil {
				return err
			}
			if _, err := runner.LoadLogin(home); err != nil {
				return fmt.Errorf("%w (log it in first: drover runner login --home %s ...)", err, home)
			}
			exe, err := executable()
			if err != nil {
				return err
			}
			u := unit{name: "drover-runner.service", command: "runner", description: "drover runner", runner: true, stopTimeout: "90s",
				exec: append([]string{exe, "runner", "--home", home}, args...), writable: []string{home}}
			if p := a.env.Getenv("PATH"); p != "" {
				u.env = append(u.env, "PATH="+p)
				u.reads = filepath.SplitList(p)
			}
			for _, ad := range catalog.Adapters() {
				if v := a.env.Getenv(ad.Endpoint.UpstreamEnv); v != "" {
					u.env = append(u.env, ad.Endpoint.UpstreamEnv+"="+v)
				}
			}
			return a.installService(f, u)
		},
	}
	f.add(install)
	install.Flags().StringVar(&home, "home", "", "runner home (default $XDG_STATE_HOME/drover/runner)")
	return serviceCmd("runner", install)
}

func (a *app) hubServiceCmd() *cobra.Command {
	var f serviceFlags
	var data string
	install := &cobra.Command{
		Use:   "install [--user] [--print] [--data DIR] [--as USER] [--unit-dir DIR] [-- HUB FLAGS...]",
		Short: "Write a systemd unit that runs the hub, hardened, and say how to enable it",
		Long: `Write drover-hub.service: 'drover hub --data DATA' with the flags after '--'
(e.g. -- --listen :7700 --url https://hub.example), restarted on failure, with
NoNewPrivileges, a read-only system, /home read-only or hidden, only the data
directory writable, no devices, no namespaces and no kernel tunables.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := serviceDir(cmd, args, data, a.dataDir, "hub", "--listen :7700")
			if err != nil {
				return err
			}
			exe, err := executable()
			if err != nil {
				return err
			}
			if _, err := os.Stat(data); err != nil && !f.print {
				// The unit's only writable path must exist: under
				// ProtectSystem=strict the hub cannot create it.
				return fmt.Errorf("data directory %s: %w (create it owned by the user the hub runs as: sudo install -d -m 0700 -o USER %s)", data, err, data)
			}
			return a.installService(f, unit{name: "drover-hub.service", command: "hub", description: "drover hub", stopTimeout: "60s",
				exec: append([]string{exe, "hub", "--data", data}, args...), writable: []string{data}})
		},
	}
	f.add(install)
	install.Flags().StringVar(&data, "data", "", "data directory (default $XDG_DATA_HOME/drover)")
	return serviceCmd("hub", install)
}
