// Command argocd-lua runs an Argo CD resource health script the way Argo CD's application
// controller runs one set in argocd-cm, so keyroll's tests check deploy/argocd/health-rotatedkey.lua
// in the VM that will run it (gopher-lua, Lua 5.1, few libraries) and not only in fengari (Lua 5.3,
// every library). Built by scripts/test-argocd-lua.sh; run by test/crd/argocd-health.test.ts.
//
//	argocd-lua SCRIPT < object.json
//
// prints the health Argo CD would record, {"status": …, "message": …} (a field Argo CD leaves empty
// is left out), and exits 0; it exits 1 with the error on stderr where Argo CD's assessment fails
// (the script does not load, raises an error, runs over a second, or returns neither a table nor nil).
//
// What it copies, from argoproj/argo-cd util/lua/lua.go (runLuaWithResourceActionParameters,
// ExecuteHealthLua, GetHealthScript; commit 37ee0097 of 2026-08-22, gopher-lua v1.1.2 and
// layeh.com/gopher-json as its go.mod pins them):
//   - A script from argocd-cm runs with gopher-lua's SkipOpenLibs unless the admin also sets
//     resource.customizations.useOpenLibs.<group>_<kind>; keyroll's docs do not, so this is the
//     only mode here. Argo CD then opens package, base and table, and its "safe os": that opener
//     registers its functions under the table library's name, which is already loaded, so it adds
//     nothing; there is no global `os`, and only `require("os")` reaches os.time and os.date
//     (through the module Argo CD preloads). No string, math, io, coroutine or debug library, and
//     no string metatable, so `s:upper()` fails too.
//   - `obj` is the object's JSON as tables, numbers, strings and booleans (a JSON null is nil, and
//     a null array item is dropped, as LTable.Append drops nil); `actionParams` is an empty table.
//   - One second of run time (the context Argo CD sets).
//   - The returned table goes through gopher-json to JSON and back into {status, message}: a
//     field of the wrong type, or an empty table, gives an empty health; a status outside
//     Healthy/Progressing/Degraded/Suspended/Missing/Unknown gives Unknown with Argo CD's message.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
)

// health is Argo CD's HealthStatus as the script's table fills it.
type health struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// invalidHealthStatus is the message Argo CD records for a status it does not know.
const invalidHealthStatus = "Lua returned an invalid health status"

var validStatuses = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

func main() {
	if len(os.Args) != 2 {
		fail(errors.New("usage: argocd-lua SCRIPT < object.json"))
	}
	script, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(err)
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	// Kubernetes' unstructured decoding yields int64 for whole numbers and float64 otherwise; both
	// become the same LNumber (a float64) in Lua, so plain float64 decoding gives the same tables.
	var object map[string]any
	if err := json.Unmarshal(input, &object); err != nil {
		fail(fmt.Errorf("the object on stdin is not a JSON object: %w", err))
	}
	result, err := assess(string(script), object)
	if err != nil {
		fail(err)
	}
	out, err := json.Marshal(result)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "argocd-lua:", err)
	os.Exit(1)
}

// assess runs the script against the object and reads its result as ExecuteHealthLua does.
func assess(script string, object map[string]any) (health, error) {
	l := newState()
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("actionParams", l.CreateTable(0, 0))
	l.SetGlobal("obj", toLua(l, object))
	fn, err := l.LoadString(script)
	if err != nil {
		return health{}, err
	}
	l.Push(fn)
	if err := l.PCall(0, lua.MultRet, nil); err != nil {
		// Argo CD shows a run error without gopher-lua's stack trace.
		var apiErr *lua.ApiError
		if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
			apiErr.StackTrace = ""
		}
		return health{}, err
	}
	returned := l.Get(-1)
	switch returned.Type() {
	case lua.LTNil:
		return health{}, nil
	case lua.LTTable:
	default:
		return health{}, fmt.Errorf("expect table output from Lua script, not %s", returned.Type())
	}
	encoded, err := luajson.Encode(returned)
	if err != nil {
		return health{}, err
	}
	var result health
	if err := json.Unmarshal(encoded, &result); err != nil {
		// Argo CD turns any type mismatch (an empty table encodes as [], a number as status) into
		// an empty health rather than an error.
		var typeError *json.UnmarshalTypeError
		if errors.As(err, &typeError) {
			return health{}, nil
		}
		return health{}, err
	}
	if !validStatuses[result.Status] {
		return health{Status: "Unknown", Message: invalidHealthStatus}, nil
	}
	return result, nil
}

// newState opens what Argo CD opens for a script without useOpenLibs, in the same order.
func newState() *lua.LState {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.OsLibName, openSafeOsAsArgoDoes},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			panic(err)
		}
	}
	safeOs := safeOsFuncs()
	l.PreloadModule(lua.OsLibName, func(l *lua.LState) int {
		l.Push(l.SetFuncs(l.NewTable(), safeOs))
		return 1
	})
	return l
}

// openSafeOsAsArgoDoes registers the safe os functions under the table library's name, as Argo
// CD's OpenSafeOs does; the table library is loaded already, so this returns it and adds nothing.
// Kept (rather than left out) so that a gopher-lua that behaved otherwise would show here.
func openSafeOsAsArgoDoes(l *lua.LState) int {
	l.Push(l.RegisterModule(lua.TabLibName, safeOsFuncs()))
	return 1
}

// safeOsFuncs are os.time and os.date, the two functions Argo CD's safe os offers. Argo CD's are
// copies of gopher-lua's own, so gopher-lua's are taken from its os library.
func safeOsFuncs() map[string]lua.LGFunction {
	scratch := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer scratch.Close()
	scratch.Push(scratch.NewFunction(lua.OpenOs))
	scratch.Call(0, 1)
	mod := scratch.CheckTable(-1)
	funcs := map[string]lua.LGFunction{}
	for _, name := range []string{"time", "date"} {
		funcs[name] = mod.RawGetString(name).(*lua.LFunction).GFunction
	}
	return funcs
}

// toLua converts a decoded JSON value as Argo CD's decodeValue does.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		table := l.CreateTable(len(v), 0)
		for _, item := range v {
			table.Append(toLua(l, item))
		}
		return table
	case map[string]any:
		table := l.CreateTable(0, len(v))
		for key, item := range v {
			table.RawSetH(lua.LString(key), toLua(l, item))
		}
		return table
	}
	return lua.LNil
}
