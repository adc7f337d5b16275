package nvfp4

import "runtime"

func runtimeGOMAXPROCS(n int) int { return runtime.GOMAXPROCS(n) }
