package runs

import (
	"testing"
	"time"
)

func TestWaitBound(t *testing.T) {
	p := DefaultWaitPolicy
	d := func(v time.Duration) *time.Duration { return &v }
	for _, c := range []struct {
		asked     *time.Duration
		watched   bool
		want      time.Duration
		shortened bool
		err       bool
	}{
		{nil, false, 30 * time.Second, false, false},
		{nil, true, 30 * time.Second, false, false},
		{d(0), false, 0, false, false},
		{d(50 * time.Second), false, 50 * time.Second, false, false},
		{d(51 * time.Second), false, 50 * time.Second, true, false},
		{d(10 * time.Minute), false, 50 * time.Second, true, false},
		{d(10 * time.Minute), true, 10 * time.Minute, false, false},
		{d(75 * time.Second), true, 75 * time.Second, false, false},
		{d(10*time.Minute + 1), true, 0, false, true},
		{d(-1), false, 0, false, true},
	} {
		got, shortened, err := p.bound(c.asked, c.watched)
		if (err != nil) != c.err || got != c.want || shortened != c.shortened {
			t.Errorf("bound(%v, watched %v) = %v, %v, %v; want %v, %v, err %v", c.asked, c.watched, got, shortened, err, c.want, c.shortened, c.err)
		}
	}
}
