package connect

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLinePrefixSaysTheBoxOnEveryLine(t *testing.T) {
	var out bytes.Buffer
	l := &linePrefix{w: &out, prefix: []byte("dev: "), start: true}
	for _, p := range []string{"ssh: conn", "ect to host\nsecond line\n", "", "third"} {
		n, err := l.Write([]byte(p))
		assert.NoError(t, err)
		assert.Equal(t, len(p), n)
	}
	assert.Equal(t, "dev: ssh: connect to host\ndev: second line\ndev: third", out.String())
}
