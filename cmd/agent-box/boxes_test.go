package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/session"
)

func writeBoxesFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "boxes.toml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// A boxes file's boxes come in the file's order, not the names' (answers
// list them so), each reached as its table says; the command line's -o
// go before a box's own options, and win (ssh takes an option's first
// value).
func TestBoxesFile(t *testing.T) {
	t.Parallel()
	path := writeBoxesFile(t, `
[boxes.zeta]
ssh = "zeta.example.com"
options = ["Port=2222", "User=me"]
remote_bin = "bin/agent-box"

[boxes.alpha]
exec = "docker exec -i alpha agent-box"

[boxes.mid]
ssh = "me@mid"
`)
	args, err := readBoxesFile(path)
	require.NoError(t, err)
	var names []string
	for _, a := range args {
		names = append(names, a.name)
	}
	assert.Equal(t, []string{"zeta", "alpha", "mid"}, names)

	boxes, err := resolveBoxes(args, transport{remoteBin: ".local/bin/agent-box", sshOpts: []string{"Port=22"}}, fleetNames)
	require.NoError(t, err)
	require.Len(t, boxes, 3)
	assert.Equal(t, "zeta", boxes[0].Name)
	zeta := strings.Join(boxes[0].Argv, " ")
	assert.Contains(t, zeta, "ssh -o Port=22 -o Port=2222 -o User=me ")
	assert.True(t, strings.HasSuffix(zeta, " -- zeta.example.com bin/agent-box"), zeta)
	assert.Equal(t, session.Box{Name: "alpha", Argv: []string{"docker", "exec", "-i", "alpha", "agent-box"}}, boxes[1])
	assert.Equal(t, "mid", boxes[2].Name)
	assert.True(t, strings.HasSuffix(strings.Join(boxes[2].Argv, " "), " -- me@mid .local/bin/agent-box"), boxes[2].Argv)
}

// Each mistake in a boxes file is an error that names the file, and the
// box when it is one box's.
func TestBoxesFileMistakes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ text, want string }{
		{"[boxes.dev]\nssh = \"dev\"\nport = 22\n", `box "dev": unknown key "port"`},
		{"[box.dev]\nssh = \"dev\"\n", `unknown key "box.dev"`},
		{"[boxes.dev]\nssh = \"dev\"\nexec = \"cmd\"\n", `box "dev": give ssh or exec, not both`},
		{"[boxes.dev]\noptions = [\"Port=1\"]\n", `box "dev": give ssh = "DEST" or exec = "COMMAND"`},
		{"[boxes.dev]\nexec = \"cmd\"\noptions = [\"Port=1\"]\n", `box "dev": options and remote_bin go with ssh`},
		{"[boxes.dev]\nssh = \"\"\n", `box "dev": ssh "" is not a destination`},
		{"[boxes.dev]\nssh = \"-oProxyCommand=x\"\n", `is not a destination`},
		{"[boxes.dev]\nexec = \" \"\n", `box "dev": exec: the command is empty`},
		{"[boxes.\"me@dev\"]\nssh = \"me@dev\"\n", `box name "me@dev"`},
		{"[boxes.dev]\nssh = \"a\"\n[boxes.dev]\nssh = \"b\"\n", `dev`},
		{"[boxes.dev]\nssh = 1\n", `ssh`},
		{"", "has no box"},
		{"# nothing\n[boxes]\n", "has no box"},
	} {
		path := writeBoxesFile(t, c.text)
		_, err := readBoxesFile(path)
		if assert.Error(t, err, "%q", c.text) {
			assert.Contains(t, err.Error(), path, "%q", c.text)
			assert.Contains(t, err.Error(), c.want, "%q", c.text)
			assert.NotContains(t, err.Error(), "\n", "one line")
		}
	}

	dir := t.TempDir()
	_, err := readBoxesFile(dir)
	assert.ErrorContains(t, err, "is not a regular file")
	_, err = readBoxesFile(filepath.Join(dir, "none.toml"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	big := writeBoxesFile(t, "# "+strings.Repeat("x", maxBoxesFile)+"\n")
	_, err = readBoxesFile(big)
	assert.ErrorContains(t, err, "is larger than")
	// A FIFO in its place is refused at once: the open must not wait for
	// a writer, or connect would hang as its client starts it.
	fifo := filepath.Join(dir, "fifo.toml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	_, err = readBoxesFile(fifo)
	assert.ErrorContains(t, err, "is not a regular file")
}

// NAME=DEST splits at the first '=' (a destination has none); --exec
// NAME='COMMAND' only where NAME is a box name, so a command's own '='
// stays its own.
func TestBoxArgForms(t *testing.T) {
	t.Parallel()
	b, err := destArg("dev=me@dev.example.com", "--box")
	require.NoError(t, err)
	assert.Equal(t, "dev", b.name)
	assert.Equal(t, "me@dev.example.com", b.dest)
	b, err = destArg("me@dev", "")
	require.NoError(t, err)
	assert.Equal(t, "", b.name)
	assert.Equal(t, "me@dev", b.dest)
	_, err = destArg("me@x=dev", "")
	assert.ErrorContains(t, err, `box name "me@x"`)
	_, err = destArg("dev=", "--box")
	assert.EqualError(t, err, `--box "dev=" is not a destination`)
	_, err = destArg("-oProxyCommand=x", "")
	assert.ErrorContains(t, err, "box name")

	b, err = execArg("a=docker exec -i a agent-box")
	require.NoError(t, err)
	assert.Equal(t, "a", b.name)
	assert.Equal(t, "docker exec -i a agent-box", b.command)
	b, err = execArg("/bin/agent-box --state-dir=/s")
	require.NoError(t, err)
	assert.Equal(t, "", b.name)
	assert.Equal(t, "/bin/agent-box --state-dir=/s", b.command)
	b, err = execArg("dev=VAR=1 agent-box")
	require.NoError(t, err)
	assert.Equal(t, "dev", b.name)
	assert.Equal(t, "VAR=1 agent-box", b.command)
	_, err = execArg("a=")
	assert.ErrorContains(t, err, "the command is empty")
}

// One box is as it always was: called by its DEST or command, or by the
// NAME given. Several need names that differ; a DEST that is a name
// itself may be its own, user@host and a command may not.
func TestBoxNames(t *testing.T) {
	t.Parallel()
	resolve := func(n naming, gave ...given) ([]string, error) {
		args, err := readGiven(gave)
		if err != nil {
			return nil, err
		}
		boxes, err := resolveBoxes(args, transport{}, n)
		var names []string
		for _, b := range boxes {
			names = append(names, b.Name)
		}
		return names, err
	}
	names, err := resolve(fleetNames, given{"", "me@dev"})
	require.NoError(t, err)
	assert.Equal(t, []string{"me@dev"}, names)
	names, err = resolve(fleetNames, given{"--exec", "docker exec -i dev agent-box"})
	require.NoError(t, err)
	assert.Equal(t, []string{"docker exec -i dev agent-box"}, names)
	names, err = resolve(fleetNames, given{"", "dev=me@dev"})
	require.NoError(t, err)
	assert.Equal(t, []string{"dev"}, names)

	names, err = resolve(fleetNames, given{"", "box1.example.com"}, given{"--exec", "b=cmd"}, given{"", "c=me@c"})
	require.NoError(t, err)
	assert.Equal(t, []string{"box1.example.com", "b", "c"}, names)

	_, err = resolve(fleetNames, given{"", "a=x"}, given{"", "me@dev"})
	assert.EqualError(t, err, `"me@dev": with several boxes, each needs a name: write NAME=me@dev`)
	_, err = resolve(fleetNames, given{"", "a=x"}, given{"--exec", "docker exec -i b agent-box"})
	assert.EqualError(t, err, `--exec "docker exec -i b agent-box": with several boxes, each needs a name: --exec NAME='COMMAND'`)
	_, err = resolve(fleetNames, given{"", "a=x"}, given{"--exec", "a=cmd"})
	assert.EqualError(t, err, `box name "a" is given twice ("a=x", --exec "a=cmd"): give each box its own NAME=`)
	_, err = resolve(fleetNames, given{"", "dev"}, given{"", "dev"})
	assert.ErrorContains(t, err, "given twice")

	// watch's boxes keep their own names, under which its cursor file
	// keeps their places.
	names, err = resolve(ownNames, given{"--box", "me@dev"}, given{"--exec", "docker exec -i b agent-box"}, given{"--exec", "c=cmd"})
	require.NoError(t, err)
	assert.Equal(t, []string{"me@dev", "docker exec -i b agent-box", "c"}, names)
}

// connect given no box reads the default boxes file, if there is one.
func TestConnectDefaultBoxesFile(t *testing.T) {
	t.Parallel()
	config := t.TempDir()
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	xdg := env(map[string]string{"XDG_CONFIG_HOME": config, "HOME": "/nonexistent"})
	boxes, err := connectBoxes(nil, "", transport{getenv: xdg})
	require.NoError(t, err)
	assert.Empty(t, boxes, "no file: no box (and the usage error)")

	require.NoError(t, os.MkdirAll(filepath.Join(config, "agent-box"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(config, "agent-box", "boxes.toml"), []byte("[boxes.b]\nexec = \"cmd b\"\n[boxes.a]\nssh = \"a\"\n"), 0o600))
	boxes, err = connectBoxes(nil, "", transport{getenv: xdg})
	require.NoError(t, err)
	require.Len(t, boxes, 2)
	assert.Equal(t, "b", boxes[0].Name)
	assert.Equal(t, "a", boxes[1].Name)

	// Else under the home; and a box given is all there is.
	home := env(map[string]string{"HOME": filepath.Dir(config)})
	assert.Equal(t, filepath.Join(filepath.Dir(config), ".config", "agent-box", "boxes.toml"), defaultBoxesFile(home))
	boxes, err = connectBoxes([]given{{"", "dev"}}, "", transport{getenv: xdg})
	require.NoError(t, err)
	require.Len(t, boxes, 1)
	assert.Equal(t, "dev", boxes[0].Name)

	// A default file that is wrong says so.
	require.NoError(t, os.WriteFile(filepath.Join(config, "agent-box", "boxes.toml"), []byte("[boxes.a]\n"), 0o600))
	_, err = connectBoxes(nil, "", transport{getenv: xdg})
	assert.ErrorContains(t, err, `box "a": give ssh`)
}

// connect --channel keeps a cursor file for each list of boxes: one
// box's is the hash of its name alone, as before there were several.
func TestChannelCursorFile(t *testing.T) {
	t.Parallel()
	one := channelCursorFile("/d", []session.Box{{Name: "box"}})
	assert.Equal(t, "/d/channel-26f8567f25691822.json", one)
	ab := channelCursorFile("/d", []session.Box{{Name: "a"}, {Name: "b"}})
	ba := channelCursorFile("/d", []session.Box{{Name: "b"}, {Name: "a"}})
	files := []string{one, ab, ba, channelCursorFile("/d", []session.Box{{Name: "a"}})}
	slices.Sort(files)
	assert.Len(t, slices.Compact(files), 4)
}
