//! How Rust reaches Neovim's API: through mlua and the Lua helpers in
//! `helpers/`, not nvim-oxi's API wrappers. nvim-oxi 0.6 never frees the
//! strings that cross its wrappers (its `String`'s `Drop` is a no-op), so
//! every buffer name, line or option value read that way leaks; Lua strings
//! are garbage collected, and LuaJIT runs these small functions fast.
//! nvim-oxi is kept for the libuv handle and `vim.schedule` (see `bridge`).
//!
//! The helpers run on the main thread and only touch editor state; Rust does
//! the rest off the main thread. They are compiled into the library, one
//! file per Rust module that calls them (`helpers/buffers.lua` for
//! `buffers.rs`, ...; `helpers/shared.lua` for those several modules call),
//! and called by name through one table ([`helper`]).

use std::cell::OnceCell;
use std::collections::HashMap;

use mlua::{FromLuaMulti, Function, IntoLuaMulti, Lua, LuaSerdeExt, Table};
use serde_json::Value;

thread_local! {
    static STATE: OnceCell<State> = const { OnceCell::new() };
}

struct State {
    lua: Lua,
    /// The helpers' table, and the function that compiles a helper file by
    /// name (see [`LAZY`]); made on the first helper call (the server's
    /// start needs none).
    helpers: OnceCell<(Table, Function)>,
    api: Table,
    /// Helpers already looked up by name (hot paths call them per keystroke).
    resolved: std::cell::RefCell<HashMap<&'static str, Function>>,
}

/// The Lua helpers: each file is the Rust module's of its name (`shared`: the
/// helpers several modules and the other files use; loaded first).
const HELPERS: [(&str, &str); 8] = [
    ("shared", include_str!("helpers/shared.lua")),
    ("annotations", include_str!("helpers/annotations.lua")),
    ("buffers", include_str!("helpers/buffers.lua")),
    ("context", include_str!("helpers/context.lua")),
    ("diagnostics", include_str!("helpers/diagnostics.lua")),
    ("editor", include_str!("helpers/editor.lua")),
    ("files", include_str!("helpers/files.lua")),
    ("open", include_str!("helpers/open.lua")),
];

/// Every helper in one table, each file compiled when a helper of it is
/// first asked for: compiling all of them is ~0.6 ms of the main thread,
/// and start-up needs two or three. The table's `__index` compiles the
/// files not yet compiled, in order, until one defines the name; `prefer`
/// compiles a named file first (the calling Rust module's own, see
/// [`helper`]). Each file is called with the table (to reach other files'
/// helpers when it runs) and returns its own; a name defined in two files
/// is an error, not a silent override (tests/integration/test_helpers.py
/// compiles them all). Done in Lua: a few dozen table operations, each of
/// which would be a protected call through mlua.
const LAZY: &str = r#"
local files, source = ...
local all, defined_in, compiled = {}, {}, {}
local function compile(i)
  compiled[i] = true
  local file = files[i]
  local chunk = assert(load(source(i), "@amp_core/nvim/helpers/" .. file .. ".lua"))
  for name, helper in pairs(chunk(all)) do
    if defined_in[name] then
      error(("helper %s is defined in helpers/%s.lua and helpers/%s.lua"):format(name, defined_in[name], file), 0)
    end
    defined_in[name] = file
    rawset(all, name, helper)
  end
end
setmetatable(all, { __index = function(_, name)
  for i = 1, #files do
    if not compiled[i] then
      compile(i)
      local found = rawget(all, name)
      if found ~= nil then
        return found
      end
    end
  end
end })
local function prefer(file)
  for i = 1, #files do
    if files[i] == file and not compiled[i] then
      compile(i)
    end
  end
end
return all, prefer
"#;

/// The files' names, and their sources one at a time (`source(i)`, 1-based)
/// as they are compiled: a Lua string of every source at load would be
/// copied and hashed for nothing.
fn load_helpers(lua: &Lua) -> mlua::Result<(Table, Function)> {
    let files = lua.create_sequence_from(HELPERS.iter().map(|(file, _)| *file))?;
    let source = lua.create_function(|lua, i: usize| {
        let (_, source) = HELPERS.get(i.wrapping_sub(1)).ok_or_else(|| mlua::Error::runtime("no such helper file"))?;
        lua.create_string(source)
    })?;
    lua.load(LAZY).set_name("=amp_core/nvim/lua.rs").call((files, source))
}

/// Called once when the module is loaded (main thread).
pub fn init(lua: &Lua) -> mlua::Result<()> {
    let vim: Table = lua.globals().get("vim")?;
    let api: Table = vim.get("api")?;
    STATE.with(|s| {
        let _ = s.set(State { lua: lua.clone(), helpers: OnceCell::new(), api, resolved: Default::default() });
    });
    Ok(())
}

fn with<R>(f: impl FnOnce(&State) -> mlua::Result<R>) -> mlua::Result<R> {
    STATE.with(|s| match s.get() {
        Some(state) => f(state),
        None => Err(mlua::Error::runtime("amp_core is not initialised")),
    })
}

/// The Lua state (main thread only).
pub fn lua() -> mlua::Result<Lua> {
    with(|s| Ok(s.lua.clone()))
}

/// Calls `helpers.<name>(args)`. The first call of a name compiles the
/// calling module's own helper file first (`helpers/buffers.lua` for
/// `buffers.rs`), where its helpers are, rather than every file before it.
#[track_caller]
pub fn helper<A: IntoLuaMulti, R: FromLuaMulti>(name: &'static str, args: A) -> mlua::Result<R> {
    let caller = std::panic::Location::caller().file();
    with(|s| {
        let cached = s.resolved.borrow().get(name).cloned();
        let function = match cached {
            Some(f) => f,
            None => {
                let module = caller.rsplit('/').next().unwrap_or_default().trim_end_matches(".rs");
                let (helpers, prefer) = match s.helpers.get() {
                    Some(made) => made,
                    None => {
                        let made = load_helpers(&s.lua)?;
                        s.helpers.get_or_init(|| made)
                    }
                };
                prefer.call::<()>(module)?;
                let f: Function = helpers.get(name)?;
                s.resolved.borrow_mut().insert(name, f.clone());
                f
            }
        };
        function.call(args)
    })
}

/// Calls `vim.api.<name>(args)`.
pub fn api<A: IntoLuaMulti, R: FromLuaMulti>(name: &str, args: A) -> mlua::Result<R> {
    with(|s| s.api.get::<Function>(name)?.call(args))
}

/// Calls a function found at a dotted path from the globals, e.g.
/// `"vim.notify"` or `"vim.ui.open"`.
pub fn global<A: IntoLuaMulti, R: FromLuaMulti>(path: &str, args: A) -> mlua::Result<R> {
    with(|s| {
        let mut parts = path.split('.');
        let mut table: Table = s.lua.globals();
        let mut name = parts.next().unwrap_or_default();
        for next in parts {
            table = table.get(name)?;
            name = next;
        }
        table.get::<Function>(name)?.call(args)
    })
}

/// A JSON value as a Lua value: objects and arrays become tables, null nil.
pub fn to_lua(value: &Value) -> mlua::Result<mlua::Value> {
    with(|s| {
        let options = mlua::SerializeOptions::new().serialize_none_to_null(false).serialize_unit_to_null(false);
        s.lua.to_value_with(value, options)
    })
}

/// A Lua value as JSON (an empty table becomes an empty object).
pub fn from_lua(value: mlua::Value) -> mlua::Result<Value> {
    with(|s| s.lua.from_value(value))
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};
    use std::path::Path;

    use regex::Regex;

    use super::HELPERS;

    /// helper name -> the file (of `HELPERS`) that defines it.
    fn defined() -> HashMap<String, &'static str> {
        let definition = Regex::new(r"(?m)^(?:function M\.(\w+)\(|M\.(\w+) = )").unwrap();
        let mut out = HashMap::new();
        for (file, source) in HELPERS {
            for c in definition.captures_iter(source) {
                let name = c.get(1).or(c.get(2)).unwrap().as_str().to_string();
                if let Some(first) = out.insert(name.clone(), file) {
                    panic!("{name} is defined in helpers/{first}.lua and helpers/{file}.lua");
                }
            }
        }
        out
    }

    /// Rust module (file stem under src/nvim/) -> the helper names it calls.
    fn called() -> HashMap<String, HashSet<String>> {
        let call = Regex::new(r#"helper(?:::<.*?>)?\(\s*"(\w+)""#).unwrap();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/nvim");
        let mut out: HashMap<String, HashSet<String>> = HashMap::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let module = path.file_stem().unwrap().to_string_lossy().into_owned();
                out.entry(module).or_default().extend(call.captures_iter(&text).map(|c| c[1].to_string()));
            }
        }
        out
    }

    #[test]
    fn each_helper_is_in_the_file_of_the_module_that_calls_it() {
        let defined = defined();
        let called = called();
        assert!(defined.len() > 20 && called.values().map(HashSet::len).sum::<usize>() > 20, "found too few to check");
        for (module, names) in &called {
            for name in names {
                let file = defined
                    .get(name)
                    .unwrap_or_else(|| panic!("{module}.rs calls {name}, which no helper file defines"));
                assert!(
                    *file == module.as_str() || *file == "shared",
                    "{module}.rs calls {name} from helpers/{file}.lua: it belongs in helpers/{module}.lua or helpers/shared.lua"
                );
            }
        }
        // Every file's helpers are called by its module, and `shared`'s by
        // some module or another helper file; none is left over.
        let used_by_helpers = Regex::new(r"\bH\.(\w+)").unwrap();
        let from_lua: HashSet<String> = HELPERS
            .iter()
            .flat_map(|(_, source)| used_by_helpers.captures_iter(source).map(|c| c[1].to_string()))
            .collect();
        for (name, file) in &defined {
            let used = if *file == "shared" {
                from_lua.contains(name) || called.values().any(|names| names.contains(name))
            } else {
                called.get(*file).is_some_and(|names| names.contains(name))
            };
            assert!(used, "helpers/{file}.lua defines {name}, which {file}.rs does not call");
        }
    }
}
