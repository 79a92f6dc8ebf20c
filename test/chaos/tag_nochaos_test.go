//go:build !chaos

package chaos

// chaosBuild is true in the tagged build, where the big suites run and the
// untagged smoke versions step aside.
const chaosBuild = false
