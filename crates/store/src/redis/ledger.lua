#!lua name=gyro
--
-- gyro's ledger on Redis Cluster: every step that changes money is one
-- function call, atomic on the master of the account's slot, idempotent by
-- its request key. Loaded by the Rust client (crates/store/src/redis) with
-- FUNCTION LOAD REPLACE on every master; see mod.rs there for the key
-- layout.
--
-- Every money step takes the same six keys, all in the account's slot:
--   KEYS[1]  <ns>:{acct:<id>}              account hash
--   KEYS[2]  <ns>:{acct:<id>}:res          reservations hash
--   KEYS[3]  <ns>:{acct:<id>}:req:<rk>     remembered answer of request rk
--   KEYS[4]  <ns>:{<slot tag>}:exp         sessions by deadline (Tcc)
--   KEYS[5]  <ns>:{<slot tag>}:cdr         CDR stream of the slot
--   KEYS[6]  <ns>:{<slot tag>}:seq         CDR sequence counter of the slot
-- and the same first arguments:
--   ARGV[1]  step name (a request key names one step, never two)
--   ARGV[2]  how long the answer is remembered, milliseconds
--   ARGV[3]  account id
--   ARGV[4]  now, Unix milliseconds (time is passed in, as to the engine)
--
-- Every answer is an array of integers: { replayed, code, ... }, replayed
-- being 1 when the answer is the remembered one of an earlier call with
-- the same request key (nothing changed this time), code a Diameter
-- result code (2001 success, 4010 blocked, 4012 no credit, 5030 unknown
-- account). Money is in minor units; Lua numbers are doubles, so every
-- amount and balance must stay within +/- 2^53 (the client checks).
--
-- Money rule, the engine's: initial + topped_up = balance + reserved +
-- debited, for every account, after every step.
--
-- Bundles (allowances of units used before money) live in the account
-- hash, one field per bundle: b:<id> = "initial remaining reserved
-- consumed"; for every bundle initial = remaining + reserved + consumed,
-- and its reserved units are the sum of the holds the account's
-- reservations carry for it. Which bundles may pay for a service (unit,
-- rating groups, service ids, validity) is the charging configuration's
-- business: the caller names them, in the engine's order; the functions
-- keep the counts. A step that draws on bundles prices the units left
-- for money itself, with the tariff the caller passes
-- ("increment price per rounding first_interval", rounding 0 up, 1 down,
-- 2 nearest), as the engine does (Tariff::cost_of).

local SUCCESS, BLOCKED, NO_CREDIT, UNKNOWN = 2001, 4010, 4012, 5030

local function int(v, what)
  local n = tonumber(v)
  if n == nil or n ~= math.floor(n) or n > 9007199254740992 or n < -9007199254740992 then
    error('gyro: bad ' .. what .. ': ' .. tostring(v))
  end
  return n
end

local function fmt(n)
  return string.format('%d', n)
end

-- The remembered answer of this request key, or nil.
-- Checks the common arguments first, so that no step fails half-way
-- (Redis does not roll a function's writes back when it raises an error).
local function remembered(keys, args)
  int(args[2], 'ttl')
  int(args[3], 'account')
  int(args[4], 'now')
  local v = redis.call('GET', keys[3])
  if not v then
    return nil
  end
  local out, first = { 1 }, true
  for word in string.gmatch(v, '%S+') do
    if first then
      if word ~= args[1] then
        error('gyro: request key already used for step ' .. word .. ', not ' .. args[1])
      end
      first = false
    else
      table.insert(out, tonumber(word))
    end
  end
  return out
end

-- Remembers `answer` (without its replayed flag) and returns it.
local function remember(keys, args, answer)
  local words = { args[1] }
  for i = 1, #answer do
    words[i + 1] = fmt(answer[i])
  end
  redis.call('SET', keys[3], table.concat(words, ' '), 'PX', int(args[2], 'ttl'))
  table.insert(answer, 1, 0)
  return answer
end

local function account(keys)
  local v = redis.call('HMGET', keys[1], 'balance', 'credit_limit', 'blocked', 'reserved')
  if not v[1] then
    return nil
  end
  return {
    balance = tonumber(v[1]),
    credit_limit = tonumber(v[2]) or 0,
    blocked = v[3] == '1',
    reserved = tonumber(v[4]) or 0,
  }
end

-- Bundle holds "b<id>:<units>,<id>:<units>" as a list of { id, units }.
local function parse_holds(text)
  local holds = {}
  for id, units in string.gmatch(text or '', '(%d+):(%d+)') do
    table.insert(holds, { id = id, units = tonumber(units) })
  end
  return holds
end

local function format_holds(holds)
  local parts = {}
  for _, h in ipairs(holds) do
    if h.units > 0 then
      table.insert(parts, h.id .. ':' .. fmt(h.units))
    end
  end
  return 'b' .. table.concat(parts, ',')
end

-- A reservation: "money units expires_at since b<holds> o<opening> owner"
-- (units: those its money pays for; holds: the bundle units it holds, by
-- bundle; opening: 1 when the session's opening request made it, so that
-- its first reported usage pays the tariff's first interval, else 0).
-- A reservation written by library versions 5 to 8 has no opening mark
-- (opening is nil: unknown), one written by version 4 no holds either.
-- Owners (node ids) have no spaces.
local function reservation(keys, field)
  local v = redis.call('HGET', keys[2], field)
  if not v then
    return nil
  end
  local money, units, expires, since, holds, opening, owner =
    string.match(v, '^(%-?%d+) (%d+) (%d+) (%d+) b([%d:,]*) o([01]) (.*)$')
  if not money then
    money, units, expires, since, holds, owner =
      string.match(v, '^(%-?%d+) (%d+) (%d+) (%d+) b([%d:,]*) (.*)$')
  end
  if not money then
    money, units, expires, since, owner = string.match(v, '^(%-?%d+) (%d+) (%d+) (%d+) (.*)$')
    holds = ''
  end
  local mark = nil
  if opening then
    mark = opening == '1'
  end
  return {
    money = tonumber(money),
    units = tonumber(units),
    expires = tonumber(expires),
    since = tonumber(since),
    holds = parse_holds(holds),
    opening = mark,
    owner = owner,
  }
end

-- Writes a reservation back; one without an opening mark (written by an
-- earlier version) stays without.
local function save_reservation(keys, field, r)
  local mark = ''
  if r.opening ~= nil then
    mark = (r.opening and 'o1' or 'o0') .. ' '
  end
  redis.call('HSET', keys[2], field,
    fmt(r.money) .. ' ' .. fmt(r.units) .. ' ' .. fmt(r.expires) .. ' ' .. fmt(r.since) .. ' '
    .. format_holds(r.holds or {}) .. ' ' .. mark .. r.owner)
end

-- A bundle of the account: { initial, remaining, reserved, consumed }, or
-- nil when the account has no bundle of that id.
local function bundle(keys, id)
  local v = redis.call('HGET', keys[1], 'b:' .. id)
  if not v then
    return nil
  end
  local i, rem, res, con = string.match(v, '^(%d+) (%d+) (%d+) (%d+)$')
  if not i then
    error('gyro: bad bundle ' .. id .. ': ' .. v)
  end
  return { initial = tonumber(i), remaining = tonumber(rem), reserved = tonumber(res),
    consumed = tonumber(con) }
end

local function save_bundle(keys, id, b)
  redis.call('HSET', keys[1], 'b:' .. id, fmt(b.initial) .. ' ' .. fmt(b.remaining) .. ' '
    .. fmt(b.reserved) .. ' ' .. fmt(b.consumed))
end

-- The bundle ids of a comma-separated list, in its order.
local function ids(list)
  local out = {}
  for id in string.gmatch(list or '', '%d+') do
    table.insert(out, id)
  end
  return out
end

-- Plans taking up to `want` units from the remaining units of bundles
-- `candidates` (in order): returns the takes { id, units, b } (nothing
-- changed yet) and the units they add up to.
local function plan_takes(keys, candidates, want)
  local takes, left, seen = {}, want, {}
  for _, id in ipairs(candidates) do
    if left == 0 then
      break
    end
    local b = nil
    if not seen[id] then
      seen[id] = true
      b = bundle(keys, id)
    end
    if b and b.remaining > 0 then
      local take = math.min(b.remaining, left)
      table.insert(takes, { id = id, units = take, b = b })
      left = left - take
    end
  end
  return takes, want - left
end

-- A tariff "increment price per rounding first_interval" (see the top).
local function tariff(text)
  local inc, price, per, rounding, first = string.match(text or '', '^(%d+) (%d+) (%d+) (%d) (%d+)$')
  if not inc then
    error('gyro: bad tariff ' .. tostring(text))
  end
  local t = { inc = math.max(1, tonumber(inc)), price = tonumber(price), per = tonumber(per),
    rounding = tonumber(rounding), first = tonumber(first) }
  if t.per < 1 then
    error('gyro: bad tariff ' .. text)
  end
  return t
end

local EXACT = 9007199254740992

-- a / b rounded down, exactly, for non-negative integers below 2^53.
local function div_floor(a, b)
  return (a - math.fmod(a, b)) / b
end

-- `u` units rounded up to the tariff's increment (Tariff::rounded_units).
local function rounded(t, u)
  local q = div_floor(u, t.inc)
  if math.fmod(u, t.inc) ~= 0 then
    q = q + 1
  end
  return q * t.inc
end

-- `units` as charged (Tariff::charged_units with first = t.first > 0):
-- at least the first interval, the rest rounded up to the increment.
local function charged_units(t, units)
  if units == 0 then
    return 0
  end
  if t.first > 0 then
    if units <= t.first then
      return t.first
    end
    return t.first + rounded(t, units - t.first)
  end
  return rounded(t, units)
end

-- The price of `charged` units, already rounded (Tariff::price_of_rated):
-- the money rounded as the tariff says, the units not rounded again.
local function price_rated(t, charged)
  if charged == 0 or t.price == 0 then
    return 0
  end
  -- charged * price / per, exactly: (a * per + b) * price / per.
  local a, b = div_floor(charged, t.per), math.fmod(charged, t.per)
  if charged >= EXACT or a * t.price >= EXACT or b * t.price >= EXACT then
    error('gyro: price beyond 2^53')
  end
  local p = b * t.price
  local q
  if t.rounding == 0 then
    q = div_floor(p, t.per)
    if math.fmod(p, t.per) ~= 0 then
      q = q + 1
    end
  elseif t.rounding == 1 then
    q = div_floor(p, t.per)
  else
    q = div_floor(p + div_floor(t.per, 2), t.per)
  end
  return a * t.price + q
end

-- The price of `units` (Tariff::cost_of with first = t.first > 0).
local function cost(t, units)
  return price_rated(t, charged_units(t, units))
end

-- The bundle units a grant of `want` units holds from bundles
-- `candidates` (Tariff::bundle_hold, version 11): whole increments, as
-- many as `want` rounded up to the increment needs, or the most whole
-- increments the bundles' remaining units give.
local function bundle_hold(keys, t, candidates, want)
  local available, seen = 0, {}
  for _, id in ipairs(candidates) do
    if not seen[id] then
      seen[id] = true
      local b = bundle(keys, id)
      if b then
        available = available + b.remaining
      end
    end
  end
  return math.min(rounded(t, want), div_floor(available, t.inc) * t.inc)
end

-- The largest grant of at most `want` units whose cost fits in `money`;
-- smaller grants are whole increments (the engine's `affordable`).
local function affordable(t, money, want)
  if cost(t, want) <= money then
    return want
  end
  if money <= 0 then
    return 0
  end
  local lo, hi = 0, div_floor(want, t.inc)
  while lo < hi do
    local mid = lo + div_floor(hi - lo + 1, 2)
    if cost(t, mid * t.inc) <= money then
      lo = mid
    else
      hi = mid - 1
    end
  end
  return lo * t.inc
end

-- Gives a reservation's bundle holds back to their bundles' remaining
-- units.
local function give_back_holds(keys, r)
  for _, h in ipairs(r.holds or {}) do
    if h.units > 0 then
      local b = bundle(keys, h.id)
      if b then
        local n = math.min(h.units, b.reserved)
        b.reserved = b.reserved - n
        b.remaining = b.remaining + n
        save_bundle(keys, h.id, b)
      end
    end
  end
  r.holds = {}
end

-- The session part of a reservation field "<session-id>|<rating key>".
local function session_of(field)
  return string.match(field, '^(.*)|[^|]*$')
end

-- After a reservation of `session` went: drops the session from the expiry
-- index when it holds no other reservation on this account.
local function unindex_if_empty(keys, args, session)
  local prefix = session .. '|'
  for _, f in ipairs(redis.call('HKEYS', keys[2])) do
    if string.sub(f, 1, #prefix) == prefix and not string.find(f, '|', #prefix + 1, true) then
      return
    end
  end
  redis.call('ZREM', keys[4], args[3] .. '|' .. session)
end

-- Appends one CDR to the slot's stream with the next sequence number of
-- the slot; returns that number.
-- `bundle_units`: units the CDR's usage took from bundles (the field is
-- written only when not 0); `rated_units`: the units the usage was rated
-- at, when the step priced it (the field is written only then).
local function cdr(keys, args, node, json, amount, unbilled, balance_after, bundle_units,
                   result_code, rated_units)
  local seq = redis.call('INCR', keys[6])
  local fields = { 'seq', fmt(seq), 'node', node, 'account', args[3], 'amount', fmt(amount),
    'unbilled', fmt(unbilled), 'balance_after', fmt(balance_after), 'at', args[4] }
  if result_code then
    -- The step's Result-Code, in place of the record's (version 8).
    table.insert(fields, 'result_code')
    table.insert(fields, fmt(result_code))
  elseif bundle_units and bundle_units > 0 then
    table.insert(fields, 'bundle_units')
    table.insert(fields, fmt(bundle_units))
  end
  if rated_units then
    -- The units the usage was rated at, in place of the record's
    -- (version 11: rounded up to the increment and the first interval).
    table.insert(fields, 'rated_units')
    table.insert(fields, fmt(rated_units))
  end
  table.insert(fields, 'cdr')
  table.insert(fields, json)
  redis.call('XADD', keys[5], '*', unpack(fields))
  return seq
end

-- gyro_open: creates an account unless it exists (no request key needed:
-- creation is idempotent by the account's existence), with its bundles.
-- An account that exists is left as it is, bundles included; one that
-- was deleted (gyro_delete left its tombstone, KEYS[2] when given) is not
-- created again.
-- KEYS[1] account [KEYS[2] tombstone]; ARGV: balance credit_limit
-- blocked(0|1) [bundles]
-- bundles: "<id>:<units>,<id>:<units>" (each a full bundle)
-- Answer: { created (1|0), balance, reserved }
local function open(keys, args)
  local a = account(keys)
  if a then
    return { 0, a.balance, a.reserved }
  end
  if keys[2] and redis.call('EXISTS', keys[2]) == 1 then
    return { 0, 0, 0 }
  end
  local balance, limit = int(args[1], 'balance'), int(args[2], 'credit limit')
  if limit < 0 then
    error('gyro: negative credit limit')
  end
  local bundles = parse_holds(args[4])
  for _, b in ipairs(bundles) do
    int(b.units, 'bundle units')
  end
  redis.call('HSET', keys[1], 'balance', fmt(balance), 'credit_limit', fmt(limit),
    'blocked', args[3] == '1' and '1' or '0', 'reserved', '0', 'debited', '0',
    'initial', fmt(balance), 'topped_up', '0')
  for _, b in ipairs(bundles) do
    save_bundle(keys, b.id, { initial = b.units, remaining = b.units, reserved = 0, consumed = 0 })
  end
  return { 1, balance, 0 }
end

-- gyro_reserve: moves money from the balance to the reservation `field`
-- (added to what it already holds); the session's deadline (for
-- gyro_expire) becomes `expires_at`.
-- ARGV[5..]: field money units min_money owner expires_at [bundles tariff
--            [opening(0|1)]]
-- opening = 1: the request is the session's opening one (its
-- CCR-Initial); a reservation this creates is marked as the opening one
-- (version 9), whose first reported usage pays the tariff's first
-- interval (see gyro_debit). A reservation that exists keeps its mark.
-- Grants `money` for `units` when the account can pay it; else what it can
-- pay if that is at least min_money (units scaled down in proportion);
-- else nothing (4012).
-- With bundles (a comma-separated list of bundle ids, in the order they
-- are drawn on) and the service's tariff: the units come from those
-- bundles' remaining units first (held by the reservation, in whole
-- increments of the tariff since version 11: as many as the units rounded
-- up to the increment need, or the most whole increments the bundles
-- give); only the units they cannot give are bought with money, priced
-- with the tariff: all of them, or the most whole increments the account
-- can pay (the engine's grant). A grant bundles give anything of is a
-- success.
-- With the tariff (and no bundle, or bundles that give nothing), a
-- partial grant is priced the same way (version 6): the most whole
-- increments the account can pay, and only their price is reserved
-- (version 5 reserved all the account could pay); nothing at all is 4012.
-- Without a tariff a partial grant is what the account can pay (at least
-- min_money), its units scaled down in proportion.
-- Answer: { replayed, code, granted_money, granted_units (those money
--           pays for), balance, reserved, bundle_units }
local function reserve(keys, args)
  local done = remembered(keys, args)
  if done then
    return done
  end
  local field, money, units = args[5], int(args[6], 'money'), int(args[7], 'units')
  local min_money, owner, expires = int(args[8], 'min money'), args[9], int(args[10], 'expiry')
  if money < 0 or units < 0 or min_money < 0 then
    error('gyro: negative reservation')
  end
  local a = account(keys)
  if not a then
    return remember(keys, args, { UNKNOWN, 0, 0, 0, 0, 0 })
  end
  if a.blocked then
    return remember(keys, args, { BLOCKED, 0, 0, a.balance, a.reserved, 0 })
  end
  local takes, from_bundles = {}, 0
  if args[11] and args[11] ~= '' then
    -- Whole increments of bundle units (version 11).
    local candidates = ids(args[11])
    local hold = bundle_hold(keys, tariff(args[12]), candidates, units)
    takes, from_bundles = plan_takes(keys, candidates, hold)
  end
  local spendable = math.max(0, a.balance + a.credit_limit)
  local grant, grant_units = money, units
  local priced = args[12] and args[12] ~= ''
  if from_bundles > 0 or (priced and spendable < money) then
    -- Money for what the bundles cannot give, priced as the engine does:
    -- all of it, or the most whole increments the account can pay, and
    -- only their price is reserved.
    local t = tariff(args[12])
    grant_units = affordable(t, spendable, math.max(0, units - from_bundles))
    grant = cost(t, grant_units)
    if from_bundles == 0 and grant_units == 0 then
      return remember(keys, args, { NO_CREDIT, 0, 0, a.balance, a.reserved, 0 })
    end
  elseif spendable < money then
    if spendable > 0 and spendable >= min_money then
      grant = spendable
      grant_units = math.floor(units * (spendable / money))
    else
      return remember(keys, args, { NO_CREDIT, 0, 0, a.balance, a.reserved, 0 })
    end
  end
  local r = reservation(keys, field)
  if not r then
    r = { money = 0, units = 0, since = int(args[4], 'now'), holds = {}, opening = args[13] == '1' }
  end
  r.money = r.money + grant
  r.units = r.units + grant_units
  r.expires = expires
  r.owner = owner
  for _, take in ipairs(takes) do
    take.b.remaining = take.b.remaining - take.units
    take.b.reserved = take.b.reserved + take.units
    save_bundle(keys, take.id, take.b)
    local held = false
    for _, h in ipairs(r.holds) do
      if h.id == take.id then
        h.units = h.units + take.units
        held = true
      end
    end
    if not held then
      table.insert(r.holds, { id = take.id, units = take.units })
    end
  end
  save_reservation(keys, field, r)
  local balance = redis.call('HINCRBY', keys[1], 'balance', fmt(-grant))
  local reserved = redis.call('HINCRBY', keys[1], 'reserved', fmt(grant))
  redis.call('ZADD', keys[4], fmt(expires), args[3] .. '|' .. session_of(field))
  return remember(keys, args, { SUCCESS, grant, grant_units, balance, reserved, from_bundles })
end

-- Gives what is left of reservation `field` back to the balance; returns
-- the money it held.
local function give_back(keys, args, field, r)
  give_back_holds(keys, r)
  redis.call('HINCRBY', keys[1], 'balance', fmt(r.money))
  redis.call('HINCRBY', keys[1], 'reserved', fmt(-r.money))
  redis.call('HDEL', keys[2], field)
  unindex_if_empty(keys, args, session_of(field))
  return r.money
end

-- gyro_debit: charges `amount`: from the reservation `field` first (none
-- or "" for an event), then from the balance down to -credit_limit; what
-- is left is recorded as unbilled, never charged. With release = 1, what
-- is left of the reservation then goes back to the balance. Appends the
-- CDR (the engine's record as JSON, completed by the ledger fields) to the
-- slot's stream in the same step.
-- ARGV[5..]: field amount release(0|1) node cdr_json [whole(0|1)
--            [used bundles tariff [opening_amount first_interval
--            unmarked(0|1)]]]
-- With opening_amount (version 9: usage of a tariff with a first
-- interval): when the reservation is the one the session's opening
-- request made (marked so by gyro_reserve; one without a mark, written by
-- an earlier version, when unmarked = 1), opening_amount is charged in
-- place of `amount`, and the tariff's first interval is `first_interval`
-- (the engine's rule: the opening reservation pays the first interval
-- when its usage is first reported, whichever request reports it). A
-- reservation a later request made, or none, is charged `amount`. The
-- first interval is paid once: a reservation kept after paying it
-- (release = 0) is no longer the opening one.
-- With whole = 1 (a direct debit: the service is rendered only if paid)
-- the debit is all or nothing: refused with 4010 on a blocked account and
-- with 4012 when the reservation and the balance cannot pay all of it;
-- nothing changes and no CDR is written.
-- With `used` (the units reported) and the service's tariff, the usage is
-- rounded up to the increment (and the first interval) first (version
-- 11; the CDR's rated_units then says so) and bundles pay for the rounded
-- units, as the engine charges usage: the reservation's bundle holds (in
-- the order they were taken), then, for the units beyond what the
-- reservation granted (bundle holds and the units its money pays for),
-- the remaining units of bundles `bundles` (comma-separated ids, in
-- order); the units left are priced with the tariff, not rounded again,
-- and charged as above. When no bundle gives anything, `amount` is
-- charged as it is (the caller's price of the same rounded units).
-- Answer: { replayed, code, charged, from_reserved, from_balance, unbilled,
--           balance_after, sequence, released, bundle_units, granted }
-- granted (version 10, on success): the units the reservation granted
-- before the debit (its bundle holds and the units its money pays for;
-- 0 without one), so that the caller can tell a report that used it up.
-- A reservation an earlier version wrote records them too (one without
-- holds, written before bundles, as its money's units).
local function debit(keys, args)
  local done = remembered(keys, args)
  if done then
    return done
  end
  local field, amount, release = args[5], int(args[6], 'amount'), args[7] == '1'
  if amount < 0 then
    error('gyro: negative debit')
  end
  local a = account(keys)
  if not a then
    return remember(keys, args, { UNKNOWN, 0, 0, 0, 0, 0, 0, 0, 0 })
  end
  local r = nil
  if field ~= '' then
    r = reservation(keys, field)
  end
  local granted = 0
  if r then
    granted = r.units
    for _, h in ipairs(r.holds) do
      granted = granted + h.units
    end
  end
  -- The opening reservation's price (checked before anything changes).
  local first = nil
  if args[14] and args[14] ~= '' then
    local opening_amount = int(args[14], 'opening amount')
    local first_interval = int(args[15], 'first interval')
    if opening_amount < 0 or first_interval < 0 then
      error('gyro: negative opening price')
    end
    if r and (r.opening or (r.opening == nil and args[16] == '1')) then
      amount = opening_amount
      first = first_interval
    end
  end
  -- Bundles first (nothing changed until the debit is known to go ahead).
  local from_holds, takes, bundle_units, rated = {}, {}, 0, nil
  if args[11] and args[11] ~= '' then
    local used = int(args[11], 'used units')
    if used < 0 then
      error('gyro: negative usage')
    end
    local t = tariff(args[13])
    if first then
      t.first = first
    end
    -- Usage is rounded up to the increment (and the first interval)
    -- first; bundles pay for the rounded units, money for the rest,
    -- priced without rounding them again (version 11).
    rated = charged_units(t, used)
    local left = rated
    if r then
      for _, h in ipairs(r.holds) do
        if left == 0 then
          break
        end
        local take = math.min(h.units, left)
        if take > 0 then
          table.insert(from_holds, { hold = h, units = take })
          left = left - take
        end
      end
    end
    local within = math.min(left, r and r.units or 0)
    local over = left - within
    local from_free = 0
    if over > 0 then
      takes, from_free = plan_takes(keys, ids(args[12]), over)
    end
    bundle_units = rated - left + from_free
    if bundle_units > 0 then
      amount = price_rated(t, left - from_free)
    end
  end
  local from_reserved = 0
  if r then
    from_reserved = math.min(amount, math.max(0, r.money))
  end
  local spendable = math.max(0, a.balance + a.credit_limit)
  if args[10] == '1' then
    if a.blocked then
      return remember(keys, args, { BLOCKED, 0, 0, 0, 0, 0, 0, 0, 0 })
    end
    if amount - from_reserved > spendable then
      return remember(keys, args, { NO_CREDIT, 0, 0, 0, 0, 0, 0, 0, 0 })
    end
  end
  for _, f in ipairs(from_holds) do
    local b = bundle(keys, f.hold.id)
    if b then
      local n = math.min(f.units, b.reserved)
      b.reserved = b.reserved - n
      b.consumed = b.consumed + n
      save_bundle(keys, f.hold.id, b)
    end
    f.hold.units = f.hold.units - f.units
  end
  for _, take in ipairs(takes) do
    -- Read again: the holds above may have changed the same bundle.
    local b = bundle(keys, take.id)
    b.remaining = b.remaining - take.units
    b.consumed = b.consumed + take.units
    save_bundle(keys, take.id, b)
  end
  local from_balance = math.min(amount - from_reserved, spendable)
  local unbilled = amount - from_reserved - from_balance
  local charged = from_reserved + from_balance
  redis.call('HINCRBY', keys[1], 'reserved', fmt(-from_reserved))
  redis.call('HINCRBY', keys[1], 'balance', fmt(-from_balance))
  redis.call('HINCRBY', keys[1], 'debited', fmt(charged))
  local released = 0
  if r then
    r.money = r.money - from_reserved
    if first then
      r.opening = false
    end
    if release then
      released = give_back(keys, args, field, r)
    else
      save_reservation(keys, field, r)
    end
  end
  local v = redis.call('HMGET', keys[1], 'balance', 'reserved')
  local balance_after = tonumber(v[1]) + tonumber(v[2])
  local seq = cdr(keys, args, args[8], args[9], charged, unbilled, balance_after, bundle_units,
    nil, rated)
  return remember(keys, args,
    { SUCCESS, charged, from_reserved, from_balance, unbilled, balance_after, seq, released,
      bundle_units, granted })
end

-- gyro_release: what is left of reservation `field` goes back to the
-- balance. Releasing a reservation that is not there changes nothing.
-- ARGV[5..]: field
-- Answer: { replayed, code, found(1|0), released, balance, reserved }
local function release(keys, args)
  local done = remembered(keys, args)
  if done then
    return done
  end
  local a = account(keys)
  if not a then
    return remember(keys, args, { UNKNOWN, 0, 0, 0, 0 })
  end
  local r = reservation(keys, args[5])
  local found, released = 0, 0
  if r then
    found = 1
    released = give_back(keys, args, args[5], r)
  end
  local v = redis.call('HMGET', keys[1], 'balance', 'reserved')
  return remember(keys, args, { SUCCESS, found, released, tonumber(v[1]), tonumber(v[2]) })
end

-- gyro_refund: gives `amount` of charged money back (REFUND_ACCOUNT):
-- balance up, debited down, and a CDR with a negative amount.
-- ARGV[5..]: amount node cdr_json
-- Answer: { replayed, code, refunded, balance_after, sequence }
local function refund(keys, args)
  local done = remembered(keys, args)
  if done then
    return done
  end
  local amount = int(args[5], 'amount')
  if amount < 0 then
    error('gyro: negative refund')
  end
  local a = account(keys)
  if not a then
    return remember(keys, args, { UNKNOWN, 0, 0, 0 })
  end
  local balance = redis.call('HINCRBY', keys[1], 'balance', fmt(amount))
  redis.call('HINCRBY', keys[1], 'debited', fmt(-amount))
  local seq = cdr(keys, args, args[6], args[7], -amount, 0, balance + a.reserved)
  return remember(keys, args, { SUCCESS, amount, balance + a.reserved, seq })
end

-- gyro_topup: adds `amount` to the balance and to topped_up.
-- ARGV[5..]: amount
-- Answer: { replayed, code, balance, topped_up, amount }
-- The answer remembers the amount (version 6; one remembered by version 5
-- lacks it), so that the caller can refuse the same request key with
-- another amount rather than replay the first top-up.
local function topup(keys, args)
  local done = remembered(keys, args)
  if done then
    return done
  end
  local amount = int(args[5], 'amount')
  if amount <= 0 then
    error('gyro: a top-up must be positive')
  end
  if not account(keys) then
    return remember(keys, args, { UNKNOWN, 0, 0, amount })
  end
  local balance = redis.call('HINCRBY', keys[1], 'balance', fmt(amount))
  local topped = redis.call('HINCRBY', keys[1], 'topped_up', fmt(amount))
  return remember(keys, args, { SUCCESS, balance, topped, amount })
end

-- gyro_update: changes an account's status and/or credit limit (no
-- request key needed: setting a value is idempotent).
-- KEYS[1] account; ARGV: blocked ("0", "1" or "" to keep it)
-- credit_limit (at least 0, or "" to keep it)
-- Answer: { found (1|0) }
local function update(keys, args)
  local limit = nil
  if args[2] and args[2] ~= '' then
    limit = int(args[2], 'credit limit')
    if limit < 0 then
      error('gyro: negative credit limit')
    end
  end
  if args[1] ~= '' and args[1] ~= '0' and args[1] ~= '1' then
    error('gyro: bad status ' .. tostring(args[1]))
  end
  if not account(keys) then
    return { 0 }
  end
  if args[1] ~= '' then
    redis.call('HSET', keys[1], 'blocked', args[1])
  end
  if limit then
    redis.call('HSET', keys[1], 'credit_limit', fmt(limit))
  end
  return { 1 }
end

-- gyro_delete: deletes an account that holds no reservation and no
-- reserved money (its bundles with it), leaving a tombstone so that
-- gyro_open does not create it again from a node's configuration.
-- Deleting an account that is not there changes nothing.
-- KEYS[1] account, KEYS[2] reservations, KEYS[3] tombstone; ARGV: now
-- Answer: { 1 deleted | 0 no such account | -1 in use }
local function delete(keys, args)
  int(args[1], 'now')
  local a = account(keys)
  if not a then
    return { 0 }
  end
  if a.reserved ~= 0 or redis.call('HLEN', keys[2]) > 0 then
    return { -1 }
  end
  redis.call('DEL', keys[1], keys[2])
  redis.call('SET', keys[3], args[1])
  return { 1 }
end

-- gyro_expire: when the session's deadline (the expiry of its latest
-- reservation on this account: Tcc, renewed by every request that
-- reserves) has passed by `now`, releases its reservations on this account
-- (when `owner` is not empty, only those node `owner` made: a dead node's)
-- and writes one session-end CDR when anything was released.
-- ARGV[5..]: session owner node cdr_json
-- Answer: { replayed, code, reservations released, money released,
--           sequence (0: no CDR) }
local function expire(keys, args)
  local done = remembered(keys, args)
  if done then
    return done
  end
  local session, owner, now = args[5], args[6], int(args[4], 'now')
  local member = args[3] .. '|' .. session
  local deadline = tonumber(redis.call('ZSCORE', keys[4], member))
  if not deadline or deadline > now then
    return remember(keys, args, { SUCCESS, 0, 0, 0 })
  end
  local prefix = session .. '|'
  local count, money, left = 0, 0, 0
  for _, f in ipairs(redis.call('HKEYS', keys[2])) do
    if string.sub(f, 1, #prefix) == prefix and not string.find(f, '|', #prefix + 1, true) then
      local r = reservation(keys, f)
      if owner == '' or r.owner == owner then
        give_back_holds(keys, r)
        redis.call('HINCRBY', keys[1], 'balance', fmt(r.money))
        redis.call('HINCRBY', keys[1], 'reserved', fmt(-r.money))
        redis.call('HDEL', keys[2], f)
        count = count + 1
        money = money + r.money
      else
        left = left + 1
      end
    end
  end
  if left == 0 then
    redis.call('ZREM', keys[4], member)
  end
  local seq = 0
  if count > 0 and account(keys) then
    local v = redis.call('HMGET', keys[1], 'balance', 'reserved')
    seq = cdr(keys, args, args[7], args[8], 0, 0, tonumber(v[1]) + tonumber(v[2]))
  end
  return remember(keys, args, { SUCCESS, count, money, seq })
end

-- gyro_end: a CCR-Terminate: releases every reservation `session` still
-- holds on this account (the services the request did not report), and
-- drops the session from the expiry index. No CDR: nothing is charged.
-- ARGV[5..]: session
-- Answer: { replayed, code, reservations released, money released }
local function end_session(keys, args)
  local done = remembered(keys, args)
  if done then
    return done
  end
  if not account(keys) then
    return remember(keys, args, { UNKNOWN, 0, 0 })
  end
  local session = args[5]
  local prefix = session .. '|'
  local count, money = 0, 0
  for _, f in ipairs(redis.call('HKEYS', keys[2])) do
    if string.sub(f, 1, #prefix) == prefix and not string.find(f, '|', #prefix + 1, true) then
      local r = reservation(keys, f)
      give_back_holds(keys, r)
      redis.call('HINCRBY', keys[1], 'balance', fmt(r.money))
      redis.call('HINCRBY', keys[1], 'reserved', fmt(-r.money))
      redis.call('HDEL', keys[2], f)
      count = count + 1
      money = money + r.money
    end
  end
  redis.call('ZREM', keys[4], args[3] .. '|' .. session)
  return remember(keys, args, { SUCCESS, count, money })
end

-- gyro_check: a balance check (CHECK_BALANCE, library version 7): could
-- the account pay `money` for `units` now? Reads only: nothing is
-- reserved, charged or remembered (a retry asks again).
-- ARGV[5..]: money units [bundles tariff [node cdr_json]]
-- With a CDR (version 8: the event CDR of a CHECK_BALANCE or
-- PRICE_ENQUIRY, as the embedded store writes it) the check appends it
-- to the slot's stream with amount 0 and the check's Result-Code (none
-- for an account that does not exist), and its answer is remembered by
-- the request key, so a retry writes no second CDR. `bundles` and
-- `tariff` may then be empty.
-- With bundles (comma-separated ids) and the tariff, their remaining
-- units count first and only the units they cannot give are priced with
-- the tariff (the engine's check).
-- Answer: { 0, code (2001, 4010 blocked, 5030 no account), enough (1|0),
--           money it would cost, bundle units it would use }
local function check(keys, args)
  local with_cdr = args[10] and args[10] ~= ''
  if with_cdr then
    local done = remembered(keys, args)
    if done then
      return done
    end
  end
  int(args[3], 'account')
  int(args[4], 'now')
  local money, units = int(args[5], 'money'), int(args[6], 'units')
  if money < 0 or units < 0 then
    error('gyro: negative check')
  end
  local a = account(keys)
  if not a then
    if with_cdr then
      return remember(keys, args, { UNKNOWN, 0, 0, 0 })
    end
    return { 0, UNKNOWN, 0, 0, 0 }
  end
  local function written(code)
    local v = redis.call('HMGET', keys[1], 'balance', 'reserved')
    cdr(keys, args, args[9], args[10], 0, 0, tonumber(v[1]) + tonumber(v[2]), 0, code)
  end
  if a.blocked then
    if with_cdr then
      written(BLOCKED)
      return remember(keys, args, { BLOCKED, 0, 0, 0 })
    end
    return { 0, BLOCKED, 0, 0, 0 }
  end
  local from_bundles = 0
  if args[7] and args[7] ~= '' then
    -- The units rounded first, then bundles, then money (version 11).
    local t = tariff(args[8])
    local rated = charged_units(t, units)
    local _
    _, from_bundles = plan_takes(keys, ids(args[7]), rated)
    if from_bundles > 0 then
      money = price_rated(t, rated - from_bundles)
    end
  end
  local spendable = math.max(0, a.balance + a.credit_limit)
  if with_cdr then
    written(SUCCESS)
    return remember(keys, args, { SUCCESS, money <= spendable and 1 or 0, money, from_bundles })
  end
  return { 0, SUCCESS, money <= spendable and 1 or 0, money, from_bundles }
end

-- Accounts created through the operator API (library version 7). The
-- subscriber directory of such accounts lives in the cluster: one claim
-- per identity, <ns>:{sub:<kind>:<data>} = "<account id> <claimed at ms>
-- <definition JSON>", taken with SET NX semantics; the account hash keeps
-- the same definition in its field `def`. Account ids come from one
-- counter, <ns>:{ids}:account, kept above every configured id. See mod.rs
-- ("Accounts created through the operator API") for the order of the
-- steps and what a node dying between them leaves.

-- gyro_account_id: raises the id counter to at least `floor`; with
-- take = 1 also takes the next id.
-- KEYS[1] counter; ARGV: floor take(0|1)
-- Answer: { id taken (or the counter, with take = 0) }
local function account_id(keys, args)
  local floor = int(args[1], 'floor')
  local cur = tonumber(redis.call('GET', keys[1])) or 0
  if cur < floor then
    redis.call('SET', keys[1], fmt(floor))
    cur = floor
  end
  if args[2] == '1' then
    return { redis.call('INCR', keys[1]) }
  end
  return { cur }
end

-- The account id and claim time of a claim's value.
local function claim_of(v)
  local id, at = string.match(v or '', '^(%d+) (%d+) ')
  return id, at
end

-- gyro_claim: claims an identity for account `id` unless another account
-- holds it; with `replace` (an account id), a claim of that account is
-- replaced (a stale claim, its account buried first by the caller).
-- KEYS[1] claim; ARGV: value id replace
-- Answer: { 1 ours | 0 held by another, holder id, its claim time }
local function claim(keys, args)
  local v = redis.call('GET', keys[1])
  if not v then
    redis.call('SET', keys[1], args[1])
    return { 1, int(args[2], 'account'), 0 }
  end
  local id, at = claim_of(v)
  if id == args[2] or (args[3] ~= '' and id == args[3]) then
    if id ~= args[2] then
      redis.call('SET', keys[1], args[1])
    end
    return { 1, int(args[2], 'account'), 0 }
  end
  return { 0, tonumber(id) or 0, tonumber(at) or 0 }
end

-- gyro_unclaim: frees an identity if account `id` holds it.
-- KEYS[1] claim; ARGV: id
-- Answer: { 1 freed | 0 not ours (or free) }
local function unclaim(keys, args)
  local id = claim_of(redis.call('GET', keys[1]))
  if id ~= nil and id == args[1] then
    redis.call('DEL', keys[1])
    return { 1 }
  end
  return { 0 }
end

-- gyro_bury: makes sure an account that does not exist never will (its
-- tombstone): the account of a stale claim, before the claim is taken
-- over, so that a creator that was only slow cannot create it late.
-- KEYS[1] account, KEYS[2] tombstone; ARGV: now
-- Answer: { 1 buried (or already) | 0 the account exists }
local function bury(keys, args)
  int(args[1], 'now')
  if redis.call('EXISTS', keys[1]) == 1 then
    return { 0 }
  end
  if redis.call('EXISTS', keys[2]) == 0 then
    redis.call('SET', keys[2], args[1])
  end
  return { 1 }
end

-- gyro_create: creates an account of the operator API with its bundles
-- and its definition (field `def`), unless it exists or was deleted (or
-- buried). Creating it again changes nothing.
-- KEYS[1] account, KEYS[2] tombstone; ARGV: balance credit_limit
-- blocked(0|1) bundles definition
-- Answer: { 1 created | 0 exists | -1 deleted or buried }
local function create(keys, args)
  local balance, limit = int(args[1], 'balance'), int(args[2], 'credit limit')
  if limit < 0 or balance < 0 then
    error('gyro: negative balance or credit limit')
  end
  local bundles = parse_holds(args[4])
  for _, b in ipairs(bundles) do
    int(b.units, 'bundle units')
  end
  if redis.call('EXISTS', keys[2]) == 1 then
    return { -1 }
  end
  if redis.call('EXISTS', keys[1]) == 1 then
    return { 0 }
  end
  redis.call('HSET', keys[1], 'balance', fmt(balance), 'credit_limit', fmt(limit),
    'blocked', args[3] == '1' and '1' or '0', 'reserved', '0', 'debited', '0',
    'initial', fmt(balance), 'topped_up', '0', 'def', args[5])
  for _, b in ipairs(bundles) do
    save_bundle(keys, b.id, { initial = b.units, remaining = b.units, reserved = 0, consumed = 0 })
  end
  return { 1 }
end

-- CDR export. Every slot's stream is exported by one node at a time, the
-- holder of its lease; the cursor is the last sequence number (and
-- stream entry) written to a CDR file and fsynced. Before a file is
-- written its range is pinned, so that a node taking the stream over
-- (the writer died before its acknowledgement) writes the same range
-- into a file of the same name, never an overlapping one.
--   KEYS[1]  <ns>:{<slot tag>}:exporter    lease: the exporting node
--   KEYS[2]  <ns>:{<slot tag>}:exported    cursor: "<seq> <entry id>"
--   KEYS[3]  <ns>:{<slot tag>}:cdr         the stream
--   KEYS[4]  <ns>:{<slot tag>}:exporting   pinned range: "<last seq> <last entry id>"

-- gyro_export_lease: takes or renews the lease of a stream for `node`.
-- ARGV: node lease_ms
-- Answer: { held (1|0), cursor sequence, cursor entry id ("" at the start),
--           pinned last sequence (0: none), pinned last entry id }
local function export_lease(keys, args)
  local ms = int(args[2], 'lease')
  local holder = redis.call('GET', keys[1])
  if holder and holder ~= args[1] then
    return { 0, 0, '', 0, '' }
  end
  redis.call('SET', keys[1], args[1], 'PX', fmt(ms))
  local seq, id = 0, ''
  local cursor = redis.call('GET', keys[2])
  if cursor then
    local s, i = string.match(cursor, '^(%d+) (.*)$')
    seq, id = tonumber(s), i
  end
  local pin_seq, pin_id = 0, ''
  local pin = redis.call('GET', keys[4])
  if pin then
    local s, i = string.match(pin, '^(%d+) (.*)$')
    if tonumber(s) > seq then
      pin_seq, pin_id = tonumber(s), i
    end
  end
  return { 1, seq, id, pin_seq, pin_id }
end

-- gyro_export_pin: pins the range of the next file (up to sequence `seq`,
-- entry `id`) unless one is pinned past the cursor already.
-- KEYS: exporter exported stream exporting; ARGV: node seq id
-- Answer: { pinned (1|0: not the lease holder), pinned last seq, its entry id }
local function export_pin(keys, args)
  local seq = int(args[2], 'sequence')
  if redis.call('GET', keys[1]) ~= args[1] then
    return { 0, 0, '' }
  end
  local cursor = redis.call('GET', keys[2])
  local done = cursor and tonumber(string.match(cursor, '^(%d+)')) or 0
  local pin = redis.call('GET', keys[4])
  if pin then
    local s, i = string.match(pin, '^(%d+) (.*)$')
    if tonumber(s) > done then
      return { 1, tonumber(s), i }
    end
  end
  redis.call('SET', keys[4], fmt(seq) .. ' ' .. args[3])
  return { 1, seq, args[3] }
end

-- gyro_export_ack: records that the stream is exported and fsynced up to
-- sequence `seq` (entry `id`) and trims what is exported from the stream.
-- Only the lease holder may; acknowledging what is already acknowledged
-- changes nothing.
-- ARGV: node seq id
-- Answer: { acknowledged (1|0: not the lease holder) }
local function export_ack(keys, args)
  local seq = int(args[2], 'sequence')
  local ms, n = string.match(args[3], '^(%d+)-(%d+)$')
  if not ms then
    error('gyro: bad stream entry id ' .. args[3])
  end
  if redis.call('GET', keys[1]) ~= args[1] then
    return { 0 }
  end
  local cursor = redis.call('GET', keys[2])
  local done = cursor and tonumber(string.match(cursor, '^(%d+)')) or 0
  if seq > done then
    redis.call('SET', keys[2], fmt(seq) .. ' ' .. args[3])
    redis.call('XTRIM', keys[3], 'MINID', '=', ms .. '-' .. fmt(tonumber(n) + 1))
  end
  local pin = redis.call('GET', keys[4])
  if pin and tonumber(string.match(pin, '^(%d+)')) <= math.max(seq, done) then
    redis.call('DEL', keys[4])
  end
  return { 1 }
end

redis.register_function('gyro_open', open)
redis.register_function('gyro_reserve', reserve)
redis.register_function('gyro_debit', debit)
redis.register_function('gyro_release', release)
redis.register_function('gyro_refund', refund)
redis.register_function('gyro_topup', topup)
redis.register_function('gyro_update', update)
redis.register_function('gyro_delete', delete)
redis.register_function('gyro_expire', expire)
redis.register_function('gyro_end', end_session)
redis.register_function('gyro_check', check)
redis.register_function('gyro_account_id', account_id)
redis.register_function('gyro_claim', claim)
redis.register_function('gyro_unclaim', unclaim)
redis.register_function('gyro_bury', bury)
redis.register_function('gyro_create', create)
redis.register_function('gyro_export_lease', export_lease)
redis.register_function('gyro_export_pin', export_pin)
redis.register_function('gyro_export_ack', export_ack)
redis.register_function {
  function_name = 'gyro_version',
  callback = function()
    return 11
  end,
  flags = { 'no-writes' },
}
