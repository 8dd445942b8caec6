-- The `wrk` table that scripts written for wrk expect, with the behaviour
-- wrk gives it: `format` builds request text from the table's defaults,
-- `init` settles the Host header and the request a script without a
-- `request` function sends, `setup` hands each thread the first address
-- that answered. volley fills in `scheme`, `host`, `port`, `path`,
-- `headers`, `lookup` and `connect` before the script runs.
local wrk = {
  scheme = "http", host = "localhost", port = nil,
  method = "GET", path = "/", headers = {}, body = nil, thread = nil,
}

-- Keeps the addresses of host:service that a connect reaches.
function wrk.resolve(host, service)
  local reachable = {}
  for _, addr in ipairs(wrk.lookup(host, service)) do
    if wrk.connect(addr) then reachable[#reachable + 1] = addr end
  end
  wrk.addrs = reachable
end

function wrk.setup(thread)
  thread.addr = wrk.addrs[1]
  if type(setup) == "function" then setup(thread) end
end

function wrk.init(args)
  if wrk.headers["Host"] == nil then
    local host = wrk.host
    if host:find(":", 1, true) then host = "[" .. host .. "]" end
    if wrk.port then host = host .. ":" .. wrk.port end
    wrk.headers["Host"] = host
  end
  if type(init) == "function" then init(args) end
  local once = wrk.format()
  wrk.request = function() return once end
end

-- The text of one request: the arguments, else the table's defaults. As
-- under wrk, the headers table given (or wrk.headers) gains Host when it
-- has none and has its Content-Length set to the body's length.
function wrk.format(method, path, headers, body)
  method = method or wrk.method
  path = path or wrk.path
  headers = headers or wrk.headers
  body = body or wrk.body
  if headers["Host"] == nil then headers["Host"] = wrk.headers["Host"] end
  headers["Content-Length"] = body and #body
  local lines = { method .. " " .. path .. " HTTP/1.1" }
  for name, value in pairs(headers) do
    lines[#lines + 1] = name .. ": " .. tostring(value)
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = body or ""
  return table.concat(lines, "\r\n")
end

return wrk
