-- What a virtual-user script sees besides Lua's own libraries: `http`,
-- `check`, `group`, `sleep` and `vu`, named as k6 names them. Every call
-- that waits (a request, a sleep) yields the VU's coroutine with a command
-- for the worker, which performs it on its event loop and resumes the
-- coroutine with the answer: a VU reads as blocking code while thousands
-- share one thread. `__vu` is the worker's side: it keeps each VU's
-- coroutine in a table by VU id (so Rust holds no handle per coroutine)
-- and resumes them. volley fills in `__check` before the script runs.
local yield, create, resume, status = coroutine.yield, coroutine.create, coroutine.resume, coroutine.status
local traceback = debug.traceback

http = {}

function http.request(method, url, body, params)
  if type(method) ~= "string" then error("http.request: the method must be a string", 2) end
  if type(url) ~= "string" then error("http.request: the URL must be a string", 2) end
  if params ~= nil and type(params) ~= "table" then error("http.request: params must be a table", 2) end
  return yield("http", method:upper(), url, body, params, vu.__group)
end

function http.get(url, params) return http.request("GET", url, nil, params) end
function http.head(url, params) return http.request("HEAD", url, nil, params) end
function http.options(url, body, params) return http.request("OPTIONS", url, body, params) end
function http.del(url, body, params) return http.request("DELETE", url, body, params) end
function http.post(url, body, params) return http.request("POST", url, body, params) end
function http.put(url, body, params) return http.request("PUT", url, body, params) end
function http.patch(url, body, params) return http.request("PATCH", url, body, params) end

-- Seconds, as k6's sleep: the VU waits, its worker goes on.
function sleep(seconds)
  if type(seconds) ~= "number" then error("sleep: the time must be a number of seconds", 2) end
  if seconds > 0 then yield("sleep", seconds) end
end

-- Runs each named test on `value`; true when all of them held. Each is
-- counted under its name (and its group's), a test that fails with an
-- error counts as failed.
function check(value, tests)
  if type(tests) ~= "table" then error("check: the tests must be a table of name = function", 2) end
  local all = true
  for name, test in pairs(tests) do
    local held
    if type(test) == "function" then
      local ok, result = pcall(test, value)
      held = ok and result and true or false
    else
      held = test and true or false
    end
    __check(vu.__group .. tostring(name), held)
    all = all and held
  end
  return all
end

-- Names requests and checks inside `fn` with the group's name, nested
-- groups joined with "::" as k6 joins them.
function group(name, fn)
  local outer = vu.__group
  vu.__group = outer .. tostring(name) .. "::"
  local function finish(ok, ...)
    vu.__group = outer
    if not ok then error((...), 0) end
    return ...
  end
  return finish(pcall(fn))
end

vu = { id = 0, iteration = 0, scenario = "default", __group = "" }

local worker = { coroutines = {}, idle = {}, context = {} }
__vu = worker

-- One VU's life: an iteration of `fn` at its start and each time it is
-- resumed again after one, an error ending that iteration alone. The
-- coroutine waits at "end" between iterations.
local function life(fn, data)
  while true do
    local ok, err = xpcall(fn, traceback, data)
    if ok then yield("end") else yield("end", tostring(err)) end
  end
end

-- Starts VU `id`'s next iteration (its `iteration`-th) of global
-- function `exec`: a new coroutine where it has none, or where its last
-- iteration was cut off (the run's end, a warm-up's).
function worker.begin(id, iteration, exec, data)
  local co = worker.coroutines[id]
  local context = worker.context[id]
  if context == nil then
    context = {}
    worker.context[id] = context
  end
  context.iteration, context.group = iteration, ""
  if co == nil or not worker.idle[id] then
    local fn = _G[exec]
    if type(fn) ~= "function" then return "end", "the script defines no function " .. exec .. "()" end
    worker.coroutines[id] = create(life)
    return worker.step(id, fn, data)
  end
  return worker.step(id, "go")
end

-- Resumes VU `id` with what its last command answered (a new coroutine
-- with its function and data); returns its next command.
-- `vu` shows the resumed VU's own id, iteration and group.
function worker.step(id, ...)
  local co, context = worker.coroutines[id], worker.context[id]
  worker.idle[id] = false
  vu.id, vu.iteration, vu.__group = id, context.iteration, context.group
  local ok, command, a, b, c, d, e = resume(co, ...)
  context.group = vu.__group
  if not ok then
    worker.coroutines[id] = nil
    return "end", tostring(command)
  end
  if command == "end" then worker.idle[id] = true end
  return command, a, b, c, d, e
end
