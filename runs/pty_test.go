package runs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPtyRequest(t *testing.T) {
	t.Parallel()
	arg := func(s string) string { return s }
	req := StartRequest{Name: "t", Spec: Spec{Argv: []string{"true"}, Pty: true}}
	require.NoError(t, req.normalize("/", arg))
	assert.Equal(t, [2]int{DefaultCols, DefaultRows}, [2]int{req.Cols, req.Rows})
	assert.Equal(t, "pipe", req.Stdin, "a pty run's stdin is its terminal")
	assert.Equal(t, "combined", req.CaptureMode)
	assert.Equal(t, ptyTerm, lookEnv(childEnv([]string{"TERM=dumb"}, &req, "t", "id"), "TERM"))
	req.Env = map[string]string{"TERM": "vt100"}
	assert.Equal(t, "vt100", lookEnv(childEnv(nil, &req, "t", "id"), "TERM"), "env sets TERM")
	plain := StartRequest{Name: "t", Spec: Spec{Argv: []string{"true"}}}
	require.NoError(t, plain.normalize("/", arg))
	assert.Equal(t, "dumb", lookEnv(childEnv([]string{"TERM=dumb"}, &plain, "t", "id"), "TERM"), "a run on pipes inherits TERM")

	for _, bad := range []StartRequest{
		{Name: "t", Spec: Spec{Argv: []string{"true"}, Pty: true, CaptureMode: "framed"}},
		{Name: "t", Spec: Spec{Argv: []string{"true"}, Rows: 24}},
		{Name: "t", Spec: Spec{Argv: []string{"true"}, Pty: true, Cols: MinCols - 1}},
		{Name: "t", Spec: Spec{Argv: []string{"true"}, Pty: true, Cols: MaxCols + 1}},
		{Name: "t", Spec: Spec{Argv: []string{"true"}, Pty: true, Rows: MinRows - 1}},
		{Name: "t", Spec: Spec{Argv: []string{"true"}, Pty: true, Rows: MaxRows + 1}},
	} {
		err := bad.normalize("/", arg)
		assert.True(t, errors.Is(err, ErrInvalid), "%+v: %v", bad, err)
	}
	for _, ok := range [][2]int{{MinCols, MinRows}, {MaxCols, MaxRows}} {
		assert.NoError(t, CheckSize(ok[0], ok[1]))
	}
}
