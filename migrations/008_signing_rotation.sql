-- 008_signing_rotation: the previous value of a rotated signing secret (issue 18, point 5).
--
-- An endpoint names one signing secret. Replacing its value (PUT /secrets/{name}) keeps the
-- value it replaced, still encrypted, and when: for TE_SIGNING_ROTATION_WINDOW_SEC after
-- that, deliveries carry a signature made with each, so receivers can move to the new key
-- without dropping a delivery. Only a whsec_ value (a signing key) is kept this way; any
-- other rotation clears both columns, so an ordinary secret's old value does not outlive
-- its replacement. DELETE removes the row, both ciphertexts with it.

ALTER TABLE secrets ADD COLUMN previous_encrypted_value BYTEA;

ALTER TABLE secrets ADD COLUMN rotated_at TIMESTAMPTZ;
