"""Personal data replaced by typed placeholders before it is stored (`privacy:` in an agent's YAML).

- `recognisers`: phone numbers, e-mail addresses, payment cards, resident IDs, passports, IBANs, IP and street
  addresses, found in text (`find_spans`), with `checksums` for the kinds that carry check digits;
- `book`, `redactor`: numbering per agent as keyed hashes, and the replacement (`[phone#1]`);
- `numbering`: the book in SQL; `policy`: one agent's redaction, which the runtime calls where text enters;
"""
