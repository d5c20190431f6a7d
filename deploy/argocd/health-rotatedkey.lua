-- Argo CD health check for keyroll.io/RotatedKey (docs/crds.md, "Argo CD health").
-- Install it in argocd-cm as resource.customizations.health.keyroll.io_RotatedKey.
-- Reads only what keyroll's leader writes on the status subresource. Argo CD runs it in
-- gopher-lua (Lua 5.1) with the base, table and package libraries only, so it uses no string,
-- math or os library, no string methods, no integer division and no goto.
local hs = {}

local function condition(conditions, kind)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function describe(c, fallback)
  if c.message ~= nil and c.message ~= "" then
    if c.reason ~= nil and c.reason ~= "" then
      return c.reason .. ": " .. c.message
    end
    return c.message
  end
  if c.reason ~= nil and c.reason ~= "" then
    return c.reason
  end
  return fallback
end

local generation = nil
if obj.metadata ~= nil then
  generation = obj.metadata.generation
end
local status = obj.status

-- keyroll has not written a status for this spec yet: a new object, or an edit it has not read.
if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for keyroll to observe the key"
  return hs
end
if generation ~= nil and status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for keyroll to observe generation " .. tostring(generation)
  return hs
end

-- Quarantined: keyroll stopped trying after repeated failures; a person has to look.
local quarantined = condition(status.conditions, "Quarantined")
if quarantined ~= nil and quarantined.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(quarantined, "Quarantined")
  return hs
end

local rotating = condition(status.conditions, "Rotating")
if rotating ~= nil and rotating.status == "True" then
  hs.status = "Progressing"
  hs.message = describe(rotating, "Rotating")
  return hs
end

local ready = condition(status.conditions, "Ready")
if ready == nil or (generation ~= nil and ready.observedGeneration ~= nil and ready.observedGeneration ~= generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for keyroll to report Ready for generation " .. tostring(generation)
  return hs
end
if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready, "Ready")
  return hs
end
if ready.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(ready, "Not ready")
  return hs
end
hs.status = "Progressing"
hs.message = describe(ready, "Ready is Unknown")
return hs
