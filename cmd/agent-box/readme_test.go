//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agent-box/agent-box/cli"
)

// The README's client configurations are what users paste; they must be
// valid and run exactly `agent-box connect box`, which runs `ssh box --
// .local/bin/agent-box`, a path from the remote home, because a command ssh
// runs does not have ~/.local/bin on its PATH on a stock Debian box (issue
// 14). (.ci/run exercises the README's make targets; test/e2e/install_test.go
// runs make install, agent-box install and these configs as written over a
// stock sshd.)
func TestReadmeClientConfigs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	readme := string(b)

	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(readme, -1)
	require.NotEmpty(t, blocks, "README has no JSON config")
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	require.NoError(t, json.Unmarshal([]byte(blocks[0][1]), &cfg))
	box, ok := cfg.MCPServers["box"]
	require.True(t, ok)
	assert.Equal(t, "agent-box", box.Command)
	assert.Equal(t, []string{"connect", "box"}, box.Args)

	toml := regexp.MustCompile("(?s)```toml\n(.*?)```").FindStringSubmatch(readme)
	require.NotNil(t, toml, "README has no Codex config")
	assert.Contains(t, toml[1], "[mcp_servers.box]")
	assert.Contains(t, toml[1], `command = "agent-box"`)
	assert.Contains(t, toml[1], `args = ["connect", "box"]`)

	assert.Contains(t, readme, "\nclaude mcp add box -- agent-box connect box\n", "the Claude Code command")
	assert.Contains(t, readme, "`agent-box connect box` runs\n`ssh box -- .local/bin/agent-box`", "what connect runs underneath")

	// Every CLI command the README shows exists.
	for _, c := range []string{"ps", "logs", "start", "kill", "wait", "version"} {
		assert.Contains(t, readme, "agent-box "+c)
	}
	out, _, _ := agentBox(t, t.TempDir(), "-h")
	for _, line := range strings.Split(readme, "\n") {
		if m := regexp.MustCompile(`^agent-box (\S+) `).FindStringSubmatch(line); m != nil && slices.Contains(cli.Commands, m[1]) {
			assert.Contains(t, out, "agent-box "+m[1], "help must show %q", m[1])
		}
	}
}

// readmeFlag is one flag of a README CLI line: "[--stream stdout|stderr]"
// is {"--stream", "stdout|stderr"}, "[-a]" is {"-a", ""}.
type readmeFlag struct{ name, value string }

// readmeCLI parses the code block of the README's "## The CLI" section:
// for each "agent-box SUB ..." line, its flags and its other arguments
// (placeholders such as NAME, "--", CMD, [ARG...]), in order.
func readmeCLI(t *testing.T) (subs []string, flags map[string][]readmeFlag, args map[string][]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)\n## The CLI\n.*?```sh\n(.*?)```").FindSubmatch(b)
	require.NotNil(t, m, "README has no sh block under \"## The CLI\"")
	flags, args = map[string][]readmeFlag{}, map[string][]string{}
	group := regexp.MustCompile(`^\[(-{1,2}[A-Za-z][\w-]*)(?: (\S+))?\]$`)
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		line, _, _ = strings.Cut(line, " #") // a comment
		words := strings.Fields(line)
		require.True(t, len(words) >= 2 && words[0] == "agent-box", "not an agent-box command line: %q", line)
		sub := words[1]
		require.NotContains(t, flags, sub, "two lines for %q", sub)
		subs = append(subs, sub)
		flags[sub] = []readmeFlag{}
		// Bracketed groups hold one space at most ("[-s SIG]"); join them.
		for i := 2; i < len(words); i++ {
			w := words[i]
			if strings.HasPrefix(w, "[") && !strings.HasSuffix(w, "]") && i+1 < len(words) {
				w += " " + words[i+1]
				i++
			}
			if g := group.FindStringSubmatch(w); g != nil {
				flags[sub] = append(flags[sub], readmeFlag{g[1], g[2]})
			} else {
				require.False(t, strings.HasPrefix(w, "-") && w != "--", "%s: flag %q outside brackets, which this test cannot parse", sub, w)
				args[sub] = append(args[sub], w)
			}
		}
	}
	return subs, flags, args
}

// helpFlags returns the flags "agent-box SUB -h" lists, each with whether
// it takes a value (flag.PrintDefaults names the value's type after it).
func helpFlags(t *testing.T, sub string) map[string]bool {
	t.Helper()
	out, errOut, code := agentBox(t, t.TempDir(), sub, "-h")
	require.Equal(t, 0, code, "%s -h: %s", sub, errOut)
	require.Contains(t, out, "usage: agent-box "+sub, "asked for, the usage is the answer: on stdout")
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)( \S+)?`).FindAllStringSubmatch(out, -1) {
		got[m[1]] = m[2] != ""
	}
	return got
}

// The README's CLI block, flag by flag: every flag a line lists is one its
// subcommand has (taking a value exactly when the README shows one), and
// parses without a usage error; every flag the subcommand has is listed.
func TestReadmeCLIFlags(t *testing.T) {
	t.Parallel()
	subs, flags, args := readmeCLI(t)
	for _, c := range cli.Commands {
		assert.Contains(t, subs, c, "the README's CLI block has no line for %q", c)
	}
	state := t.TempDir()
	samples := map[string]string{"DIR": t.TempDir(), "S": "1", "MS": "1", "SIG": "TERM", "ID": "20260101T000000.000000000Z-000000", "L": "pids=100", "KEYS": "ctrl-p,ctrl-q", "N": "1"}
	n := 0
	for _, sub := range subs {
		if !slices.Contains(cli.Commands, sub) {
			// version, help and doctor, which main answers itself: each
			// flag the README shows is accepted (doctor exits 1 where a
			// check fails, which is no usage error).
			for _, f := range flags[sub] {
				assert.Empty(t, f.value, "%s %s: no sample value", sub, f.name)
				_, errOut, code := agentBox(t, state, sub, f.name)
				assert.NotEqual(t, cli.ExitUsage, code, "%s %s: %s", sub, f.name, errOut)
				assert.NotContains(t, errOut, "flag provided but not defined", "%s %s", sub, f.name)
			}
			continue
		}
		t.Run(sub, func(t *testing.T) {
			help := helpFlags(t, sub)
			listed := map[string]bool{}
			for _, f := range flags[sub] {
				name := strings.TrimLeft(f.name, "-")
				listed[name] = true
				takesValue, ok := help[name]
				if !assert.True(t, ok, "README lists %s %s; %s -h does not", sub, f.name, sub) {
					continue
				}
				assert.Equal(t, f.value != "", takesValue, "%s %s: README value %q, but -h says it takes a value: %v", sub, f.name, f.value, takesValue)

				// Run it once with just this flag and a value of the
				// README's placeholder.
				n++
				name = fmt.Sprintf("readme-%d", n)
				argv := []string{sub, f.name}
				if f.value != "" {
					v, ok := samples[f.value]
					if alts := strings.Split(f.value, "|"); len(alts) > 1 {
						v, ok = alts[0], true
					}
					require.True(t, ok, "no sample value for %s %s %s: add one", sub, f.name, f.value)
					argv = append(argv, v)
				}
				for _, a := range args[sub] {
					switch a {
					case "NAME":
						argv = append(argv, name)
					case "--":
						argv = append(argv, a)
					case "CMD":
						argv = append(argv, "true")
					case "[TEXT...]":
						argv = append(argv, "text")
					case "[ARG...]":
					default:
						t.Fatalf("%s: no sample for the argument %q: add one", sub, a)
					}
				}
				_, errOut, code := agentBox(t, state, argv...)
				assert.NotEqual(t, cli.ExitUsage, code, "%q is a usage error: %s", argv, errOut)
				assert.NotContains(t, errOut, "flag provided but not defined", "%q", argv)
				if sub == "start" {
					assert.Equal(t, 0, code, "%q: %s", argv, errOut)
					// Let the run end before the state dir is removed.
					_, errOut, code = agentBox(t, state, "wait", name)
					assert.Equal(t, 0, code, "wait %s: %s", name, errOut)
				}
			}
			for name := range help {
				assert.True(t, listed[name], "%s -h has -%s; the README's CLI block does not list it", sub, name)
			}
		})
	}
}

// The hook configs of the README and docs/hooks.md are JSON, and every
// command in them is an agent-box watch this agent-box takes: run against
// a box of this machine, looking once, it answers 0 (nothing ended), not a
// usage error.
func TestReadmeHookConfigs(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	n := 0
	for _, doc := range []string{"README.md", "docs/hooks.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", doc))
		require.NoError(t, err)
		for _, block := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(b, -1) {
			if !bytes.Contains(block[1], []byte(`"hooks"`)) {
				continue
			}
			var config struct {
				Hooks map[string][]struct {
					Hooks []struct {
						Type    string `json:"type"`
						Command string `json:"command"`
					} `json:"hooks"`
				} `json:"hooks"`
			}
			require.NoError(t, json.Unmarshal(block[1], &config), "%s: %s", doc, block[1])
			for event, matchers := range config.Hooks {
				for _, m := range matchers {
					for _, h := range m.Hooks {
						n++
						assert.Equal(t, "command", h.Type, "%s %s", doc, event)
						words := strings.Fields(h.Command)
						require.True(t, len(words) > 2 && words[0] == "agent-box" && words[1] == "watch", "%s %s: %q", doc, event, h.Command)
						args := []string{"watch", "--cursor-file", filepath.Join(t.TempDir(), "cursor.json")}
						for i := 2; i < len(words); i++ {
							if words[i] == "--box" && i+1 < len(words) {
								args = append(args, "--exec", binary+" --state-dir "+state)
								i++
								continue
							}
							args = append(args, words[i])
						}
						if !slices.Contains(args, "--no-wait") {
							args = append(args, "--no-wait")
						}
						cmd := exec.Command(binary, args...)
						out, err := cmd.CombinedOutput()
						assert.NoError(t, err, "%s %s: %q: %s", doc, event, h.Command, out)
					}
				}
			}
		}
	}
	assert.GreaterOrEqual(t, n, 10, "the hooks of both docs: Claude Code's three and Codex's two, twice")
}
