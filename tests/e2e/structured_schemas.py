"""JSON schemas for the structured-output tests: 24 written by hand (the shapes applications send:
nested objects, arrays with min/max items, enums, const, anyOf, $defs/$ref, patterns, formats,
numbers with bounds, optional fields, additionalProperties false) and 96 generated from a seed by
combining the same pieces. Each entry: (name, instruction for the model, schema)."""
import random

S = lambda n=24: {"type": "string", "maxLength": n}  # noqa: E731
INT = lambda lo=0, hi=100: {"type": "integer", "minimum": lo, "maximum": hi}  # noqa: E731


def obj(props, required=None, extra=False):
    o = {"type": "object", "properties": props, "required": list(props) if required is None else required}
    if not extra:
        o["additionalProperties"] = False
    return o


HAND = [
    ("person", "a person named Alice who is 30", obj({"name": S(), "age": INT(0, 120)})),
    ("book", "a book with its title, author and year",
     obj({"title": S(40), "author": S(), "year": INT(1400, 2030)})),
    ("weather", "today's weather in Paris",
     obj({"city": S(), "temperature_c": {"type": "number", "minimum": -50, "maximum": 60},
          "condition": {"enum": ["sunny", "cloudy", "rain", "snow"]}})),
    ("todo", "a todo list with up to 3 items",
     obj({"items": {"type": "array", "items": obj({"task": S(30), "done": {"type": "boolean"}}),
                    "minItems": 1, "maxItems": 3}})),
    ("address", "the address of a museum",
     {"$defs": {"addr": obj({"street": S(30), "city": S(), "zip": {"type": "string", "pattern": "^[0-9]{5}$"}})},
      **obj({"museum": S(), "address": {"$ref": "#/$defs/addr"}})}),
    ("contact", "a contact card", obj({"name": S(), "email": {"type": "string", "format": "email"},
                                       "phone": {"type": "string", "pattern": "^\\+?[0-9]{7,12}$"}})),
    ("event", "a meeting next week", obj({"title": S(), "date": {"type": "string", "format": "date"},
                                          "attendees": {"type": "array", "items": S(16), "maxItems": 4}})),
    ("version", "the current software version", obj({"kind": {"const": "release"},
                                                     "version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+$"}})),
    ("answer", "the answer to 6 times 7", obj({"answer": INT(0, 1000), "explanation": S(60)})),
    ("id_or_name", "an identifier", obj({"id": {"anyOf": [INT(1, 9999), S(12)]}})),
    ("optional_fields", "a product, with a price if you know it",
     obj({"name": S(), "price": {"type": "number", "minimum": 0, "maximum": 10000}, "tags": {"type": "array", "items": S(10), "maxItems": 3}},
         required=["name"])),
    ("nested", "a company with its CEO",
     obj({"company": S(), "ceo": obj({"name": S(), "since": INT(1950, 2026)})})),
    ("matrix", "a 2x2 matrix of small numbers",
     obj({"rows": {"type": "array", "minItems": 2, "maxItems": 2,
                   "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": INT(-9, 9)}}})),
    ("uuid", "a new record with an id", obj({"id": {"type": "string", "format": "uuid"}, "label": S(12)})),
    ("ip", "a server and its IPv4 address", obj({"host": S(), "ip": {"type": "string", "format": "ipv4"}})),
    ("sentiment", "the sentiment of 'I love this'",
     obj({"sentiment": {"enum": ["positive", "negative", "neutral"]}, "confidence": {"type": "number", "minimum": 0, "maximum": 1}})),
    ("colors", "three colors", obj({"colors": {"type": "array", "items": {"enum": ["red", "green", "blue", "yellow"]},
                                               "minItems": 3, "maxItems": 3}})),
    ("tree", "a small family tree",
     {"$defs": {"node": {"type": "object", "properties": {"name": S(12), "children": {"type": "array", "maxItems": 2,
                                                                                       "items": {"$ref": "#/$defs/node"}}},
                         "required": ["name"], "additionalProperties": False}},
      "$ref": "#/$defs/node"}),
    ("shape", "a shape", {"anyOf": [obj({"kind": {"const": "circle"}, "radius": INT(1, 50)}),
                                    obj({"kind": {"const": "square"}, "side": INT(1, 50)})]}),
    ("nullable", "a user whose nickname may be missing",
     obj({"user": S(), "nickname": {"anyOf": [S(12), {"type": "null"}]}})),
    ("open_object", "a settings object", obj({"theme": {"enum": ["dark", "light"]}}, extra=True)),
    ("scores", "scores of three players", obj({"scores": {"type": "array", "items": obj({"player": S(10), "score": INT(0, 100)}),
                                                          "minItems": 1, "maxItems": 3}})),
    ("time", "the opening hours of a shop",
     obj({"opens": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
          "closes": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"}})),
    ("bools", "a feature flag set", obj({"beta": {"type": "boolean"}, "dark_mode": {"type": "boolean"}, "limit": INT(1, 10)})),
]

WORDS = ["name", "title", "city", "color", "score", "count", "label", "level", "kind", "owner", "status", "note",
         "price", "rank", "size", "topic", "mood", "code", "year", "tag"]


def piece(rng, depth):
    k = rng.randrange(12 if depth < 2 else 9)
    if k == 0:
        return S(rng.choice([8, 16, 32]))
    if k == 1:
        lo = rng.randrange(-50, 50)
        return INT(lo, lo + rng.choice([9, 99, 999]))
    if k == 2:
        return {"type": "number", "minimum": 0, "maximum": rng.choice([1, 10, 1000])}
    if k == 3:
        return {"type": "boolean"}
    if k == 4:
        return {"enum": rng.sample(["alpha", "beta", "gamma", "delta", "omega", "red", "blue"], rng.randrange(2, 5))}
    if k == 5:
        return {"const": rng.choice(["v1", "fixed", "yes"])}
    if k == 6:
        return {"type": "string", "pattern": rng.choice(["^[a-z]{3,8}$", "^[A-Z][0-9]{2}$", "^(yes|no)$", "^[0-9]{4}-[0-9]{2}$"])}
    if k == 7:
        return {"anyOf": [piece(rng, depth + 1), piece(rng, depth + 1)]}
    if k == 8:
        return {"type": "string", "format": rng.choice(["email", "date", "uuid", "ipv4"])}
    if k == 9:
        lo = rng.randrange(0, 3)
        return {"type": "array", "items": piece(rng, depth + 1), "minItems": lo, "maxItems": lo + rng.randrange(1, 4)}
    return make_object(rng, depth + 1)


def make_object(rng, depth=0):
    names = rng.sample(WORDS, rng.randrange(1, 5 if depth else 7))
    props = {n: piece(rng, depth) for n in names}
    required = [n for n in names if rng.random() < 0.8]
    return obj(props, required=required, extra=rng.random() < 0.15)


def schemas():
    out = list(HAND)
    for i in range(96):
        rng = random.Random(1000 + i)
        s = make_object(rng)
        if rng.random() < 0.2:  # the same object through $defs / $ref
            s = {"$defs": {"item": s}, "$ref": "#/$defs/item"}
        out.append((f"generated_{i}", "an example record with made-up values", s))
    return out
