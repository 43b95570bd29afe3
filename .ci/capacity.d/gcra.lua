-- GCRA (the generic cell rate algorithm) in one call, as a shared rate
-- limit runs it: KEYS[1] is the caller's key, ARGV[1] the burst and
-- ARGV[2] the rate per second. Answers 1 (allowed) or 0.
local burst = tonumber(ARGV[1])
local interval = 1e6 / tonumber(ARGV[2])
local t = redis.call("TIME")
local now = t[1] * 1e6 + t[2]
local tat = tonumber(redis.call("GET", KEYS[1])) or now
if tat < now then tat = now end
local new = tat + interval
if new - now > interval * burst then return 0 end
redis.call("SET", KEYS[1], new, "PX", math.ceil((new - now) / 1000) + 1)
return 1
