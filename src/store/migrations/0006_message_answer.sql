-- 6: what an assistant message's answer rests on, kept with the message so that a
-- reopened conversation shows its citations and sources as they were: a JSON object
-- `{"answer_mode", "sources", "grounding"}` (NULL for user messages and for messages
-- stored before this migration).

ALTER TABLE messages ADD COLUMN answer TEXT;
