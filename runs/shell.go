package runs

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/agent-box/agent-box/runrecord"
)

// Whose exit status a run reports (Run.StatusOf).
const (
	StatusOfProgram = "program" // the leader is the program itself
	StatusOfShell   = "shell"   // the leader is /bin/sh, running a compound command
)

// shellBuiltins are the commands a /bin/sh runs itself — dash's, and
// bash's (/bin/sh on Fedora and Arch) with its keywords: exec'ing one
// would run a different program (/bin/echo) or none (cd, declare), so a
// command naming one keeps its shell.
var shellBuiltins = map[string]bool{
	".": true, ":": true, "[": true, "[[": true, "alias": true, "bg": true, "bind": true, "break": true,
	"builtin": true, "caller": true, "cd": true, "chdir": true, "command": true, "compgen": true,
	"complete": true, "compopt": true, "continue": true, "coproc": true, "declare": true, "dirs": true,
	"disown": true, "echo": true, "enable": true, "eval": true, "exec": true, "exit": true,
	"export": true, "false": true, "fc": true, "fg": true, "function": true, "getopts": true,
	"hash": true, "help": true, "history": true, "jobs": true, "kill": true, "let": true,
	"local": true, "logout": true, "mapfile": true, "popd": true, "printf": true, "pushd": true,
	"pwd": true, "read": true, "readarray": true, "readonly": true, "return": true, "select": true,
	"set": true, "shift": true, "shopt": true, "source": true, "suspend": true, "test": true,
	"time": true, "times": true, "trap": true, "true": true, "type": true, "typeset": true,
	"ulimit": true, "umask": true, "unalias": true, "unset": true, "wait": true,
}

// shellScript returns the script /bin/sh -c runs for command, and whose
// exit status the run will report. dash, Debian's /bin/sh, does not exec a
// lone command as bash does, so for "python3 -m http.server" the leader
// would be the shell: a SIGINT that python handles and exits 0 on would be
// reported as the shell's death by SIGINT. When command is one simple
// command — no pipe, list, subshell, background job, negation, assignment
// prefix, or builtin, and a program name the parser sees as plain text —
// "exec " is put before the program name, so the program replaces the
// shell: same pid, its own status. Redirections stay where they are; the
// shell applies them before the exec. Anything else, and anything the
// POSIX parser refuses, runs unchanged and reports the shell's status.
func shellScript(command string) (script, statusOf string) {
	at, _, ok := loneCommand(command)
	if !ok {
		return command, StatusOfShell
	}
	return command[:at] + "exec " + command[at:], StatusOfProgram
}

// loneCommand finds the program name of command's only simple command,
// and its byte offset, if it is one that can be exec'd.
func loneCommand(command string) (at int, name string, ok bool) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(command), "")
	if err != nil || len(f.Stmts) != 1 {
		return 0, "", false
	}
	st := f.Stmts[0]
	if st.Negated || st.Background || st.Coprocess || st.Disown {
		return 0, "", false
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return 0, "", false
	}
	// Lit returns the word with its backslashes: c\d is cd to the shell,
	// so a name with a backslash or a quote keeps its shell. So does one
	// starting with '-', which exec would take as its option (bash's -l).
	name = call.Args[0].Lit()
	if name == "" || shellBuiltins[name] || strings.ContainsAny(name, "\\'\"") || strings.HasPrefix(name, "-") {
		return 0, "", false
	}
	at = int(call.Args[0].Pos().Offset())
	if at < 0 || at > len(command) || !strings.HasPrefix(command[at:], name) {
		return 0, "", false
	}
	return at, name, true
}

// statusOf is whose exit status rec's run reports. Records written before
// status_of existed ran every command under the shell.
func statusOf(rec *runrecord.Record) string {
	switch {
	case rec.StatusOf == StatusOfProgram || rec.StatusOf == StatusOfShell:
		return rec.StatusOf
	case len(rec.Argv) > 0:
		return StatusOfProgram
	}
	return StatusOfShell
}
