// Command gitea is Gitea v1.26.0's CLI, built as Gitea's own main.go builds it, for drover's
// tests (internal/testkit.StartGitea). Only the version string differs.
package main

import (
	"os"
	"runtime"
	"time"

	"code.gitea.io/gitea/cmd"
	"code.gitea.io/gitea/modules/log"
	"code.gitea.io/gitea/modules/setting"

	// Gitea's main registers these renderers; keep the same set.
	_ "code.gitea.io/gitea/modules/markup/asciicast"
	_ "code.gitea.io/gitea/modules/markup/console"
	_ "code.gitea.io/gitea/modules/markup/csv"
	_ "code.gitea.io/gitea/modules/markup/markdown"
	_ "code.gitea.io/gitea/modules/markup/orgmode"

	"github.com/urfave/cli/v3"
)

const version = "1.26.0"

func init() {
	setting.AppVer = version
	setting.AppBuiltWith = " built with " + runtime.Version() + " : sqlite, sqlite_unlock_notify (drover tests)"
	setting.AppStartTime = time.Now().UTC()
}

func main() {
	cli.OsExiter = func(code int) {
		log.GetManager().Close()
		os.Exit(code)
	}
	app := cmd.NewMainApp(cmd.AppVersion{Version: version, Extra: setting.AppBuiltWith})
	_ = cmd.RunMainApp(app, os.Args...)
	// Gitea's logger queues; close it so the last lines reach the log.
	log.GetManager().Close()
}
