package runs

import "testing"

func TestShellScript(t *testing.T) {
	for _, c := range []struct {
		command, script, statusOf string
	}{
		{"python3 -m http.server", "exec python3 -m http.server", StatusOfProgram},
		{"sleep 30", "exec sleep 30", StatusOfProgram},
		{"  sleep 30\n", "  exec sleep 30\n", StatusOfProgram},
		{"# a comment\nsleep 30", "# a comment\nexec sleep 30", StatusOfProgram},
		{"make test > out.txt 2>&1", "exec make test > out.txt 2>&1", StatusOfProgram},
		{">out make", ">out exec make", StatusOfProgram},
		{"./server --port $PORT", "exec ./server --port $PORT", StatusOfProgram},
		{"cat <<EOF\nhi\nEOF\n", "exec cat <<EOF\nhi\nEOF\n", StatusOfProgram},
		{"go test ./... ;", "exec go test ./... ;", StatusOfProgram},
		// The shell stays: its status is the run's.
		{"make && make install", "", StatusOfShell},
		{"make | tee log", "", StatusOfShell},
		{"make; echo done", "", StatusOfShell},
		{"sleep 1 &", "", StatusOfShell},
		{"! false", "", StatusOfShell},
		{"(cd /tmp && ls)", "", StatusOfShell},
		{"{ ls; }", "", StatusOfShell},
		{"FOO=1 env", "", StatusOfShell},
		{"cd /tmp", "", StatusOfShell},
		{"echo hi", "", StatusOfShell},
		{"exec sleep 1", "", StatusOfShell},
		{"trap 'echo bye' EXIT; sleep 1", "", StatusOfShell},
		{"$CMD arg", "", StatusOfShell},
		{"'sleep' 1", "", StatusOfShell},
		{"if true; then sleep 1; fi", "", StatusOfShell},
		{"f() { sleep 1; }; f", "", StatusOfShell},
		{"for i in 1 2; do echo $i; done", "", StatusOfShell},
		{"sleep 1 &&", "", StatusOfShell}, // a syntax error is the shell's to report
		{"[[ -f x ]]", "", StatusOfShell},
		{`c\d /tmp`, "", StatusOfShell},
		{`\exit 3`, "", StatusOfShell},
		{"declare -x A=1", "", StatusOfShell},
		{"time make", "", StatusOfShell},
		{"-l foo", "", StatusOfShell},
	} {
		script, statusOf := shellScript(c.command)
		want := c.script
		if want == "" {
			want = c.command
		}
		if script != want || statusOf != c.statusOf {
			t.Errorf("shellScript(%q) = %q, %s; want %q, %s", c.command, script, statusOf, want, c.statusOf)
		}
	}
}
