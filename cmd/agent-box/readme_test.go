package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's client configurations are what users paste; they must be
// valid and run exactly `ssh box -- agent-box`. (.ci/run exercises the
// README's make targets; the ssh and inspector lanes run the same commands
// against a local sshd.)
func TestReadmeClientConfigs(t *testing.T) {
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
	assert.Equal(t, "ssh", box.Command)
	assert.Equal(t, []string{"box", "--", "agent-box"}, box.Args)

	toml := regexp.MustCompile("(?s)```toml\n(.*?)```").FindStringSubmatch(readme)
	require.NotNil(t, toml, "README has no Codex config")
	assert.Contains(t, toml[1], "[mcp_servers.box]")
	assert.Contains(t, toml[1], `command = "ssh"`)
	assert.Contains(t, toml[1], `args = ["box", "--", "agent-box"]`)

	// Every CLI command the README shows exists.
	for _, c := range []string{"ps", "logs", "start", "kill", "wait", "version"} {
		assert.Contains(t, readme, "agent-box "+c)
	}
	_, errOut, _ := agentBox(t, t.TempDir(), "-h")
	for _, line := range strings.Split(readme, "\n") {
		if m := regexp.MustCompile(`^agent-box (ps|logs|start|kill|wait) `).FindStringSubmatch(line); m != nil {
			assert.Contains(t, errOut, "agent-box "+m[1], "help must show %q", m[1])
		}
	}
}
