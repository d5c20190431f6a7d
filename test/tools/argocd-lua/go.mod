// The Lua VM Argo CD runs health scripts in, for test/crd/argocd-health.test.ts (built by
// scripts/test-argocd-lua.sh). Versions as argoproj/argo-cd's go.mod pins them (2026-08-22).
module keyroll.test/argocd-lua

go 1.23

require (
	github.com/yuin/gopher-lua v1.1.2
	layeh.com/gopher-json v0.0.0-20190114024228-97fed8db8427
)
