-- A shopper: reads the user list, opens one user chosen from it, and posts
-- a form, checking each answer. Run it against `volley serve`:
--   volley serve &
--   volley script examples/vus/shop.lua http://127.0.0.1:3556 --vus 5 -d 10s
options = { vus = 2, iterations = 10 }

function default()
  local list = http.get("/api/users", { name = "list users" })
  check(list, { ["list is 200"] = function(r) return r.status == 200 end })
  local users = list:json().users
  local picked = users[(vu.iteration % #users) + 1]
  local one = http.get("/api/users/" .. picked.id, { name = "one user" })
  check(one, {
    ["user is 200"] = function(r) return r.status == 200 end,
    ["user is json"] = function(r) return r.headers["Content-Type"]:find("json") ~= nil end,
  })
  group("checkout", function()
    local res = http.post("/echo", { user = tostring(picked.id), vu = tostring(vu.id) })
    check(res, { ["echoed"] = function(r) return r.body:find("user=") ~= nil end })
  end)
  sleep(0.01)
end
