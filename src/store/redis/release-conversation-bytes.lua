-- novaReleaseConversationBytes (conversations.ts).
-- KEYS: conversation bytes held, reservations, their sizes. ARGV: reservation id.
-- Gives the reservation back (nothing was stored); nothing happens when it is already gone.
-- give_back(): conversation-reservations.lua, set before this by the caller.
give_back(KEYS[1], KEYS[2], KEYS[3], ARGV[1])
return 1
