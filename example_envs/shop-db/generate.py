#!/usr/bin/env python3
"""Build the database and the tasks of ``envhub-examples/shop-db``.

    python generate.py               # rewrite state/shop.sqlite and tasks/{train,dev,test}.jsonl
    python generate.py --out /tmp/x  # write them under /tmp/x instead

Standard library only, and deterministic: the same seed always gives the same rows, so the
task files come out byte for byte identical and ``envhub validate`` can check the digests
recorded in ``envhub.toml``. The database file is identical too when written by the same
SQLite version (its header records the version); its content, as ``.dump`` prints it, is
identical with any version.

The database is Harbor & Pine, a small homeware shop invented here: 40 customers in six
cities, 30 products in five categories, 260 orders placed in 2024 with their order lines,
and product reviews. Two details make the questions less trivial than they look: money is
stored in whole cents, and during the November sale lighting sold at 20% off, so what an
order was worth is ``order_items.unit_price_cents``, not the product's current list price.

Each task is a question from one of the templates below, filled in with values from the
database. Its answer is computed by running the template's SQL on the database just built;
its reference solution is the tool calls an analyst would make (list the tables, describe
the ones the question needs, run that SQL) and a final reply with the answer in ``\\boxed{}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

DEFAULT_SEED = 20240917
SIZES = {"test": 12, "dev": 12, "train": 45}  # dealt in this order, so resizing train leaves the others alone

SCHEMA = """\
CREATE TABLE customers (
    id        INTEGER PRIMARY KEY,
    name      TEXT NOT NULL,
    city      TEXT NOT NULL,
    joined_on TEXT NOT NULL  -- the day the customer signed up, 'YYYY-MM-DD'
);
CREATE TABLE products (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    category    TEXT NOT NULL,     -- kitchen, garden, lighting, textiles or stationery
    price_cents INTEGER NOT NULL,  -- the current list price in cents: 1299 is $12.99
    stock       INTEGER NOT NULL   -- units in the warehouse today
);
CREATE TABLE orders (
    id          INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (id),
    ordered_on  TEXT NOT NULL,  -- 'YYYY-MM-DD'
    status      TEXT NOT NULL CHECK (status IN ('placed', 'shipped', 'delivered', 'cancelled'))
);
CREATE TABLE order_items (
    order_id         INTEGER NOT NULL REFERENCES orders (id),
    product_id       INTEGER NOT NULL REFERENCES products (id),
    quantity         INTEGER NOT NULL,
    unit_price_cents INTEGER NOT NULL,  -- the price paid per unit, in cents; below the list price during a sale
    PRIMARY KEY (order_id, product_id)
);
CREATE TABLE reviews (
    id          INTEGER PRIMARY KEY,
    product_id  INTEGER NOT NULL REFERENCES products (id),
    customer_id INTEGER NOT NULL REFERENCES customers (id),
    rating      INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    reviewed_on TEXT NOT NULL  -- 'YYYY-MM-DD'
);
"""

CITIES = {"Lisbon": 9, "Porto": 6, "Valencia": 8, "Lyon": 7, "Ghent": 5, "Bremen": 5}  # city: customers
FIRST_NAMES = ["Ana", "Bruno", "Carla", "Dario", "Elif", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Katya",
               "Luis", "Marta", "Nils", "Olga", "Pedro", "Quinn", "Rosa", "Sami", "Tilde", "Umar", "Vera",
               "Wim", "Xenia", "Yusuf", "Zoe"]
LAST_NAMES = ["Almeida", "Berger", "Castro", "Dubois", "Eriksen", "Ferreira", "Gomez", "Hartmann", "Iglesias",
              "Jansen", "Keller", "Laurent", "Moreau", "Novak", "Oliveira", "Peeters", "Quintana", "Richter",
              "Santos", "Teixeira", "Urban", "Vidal", "Weber", "Young"]
PRODUCTS = {  # category: [(name, list price in cents)]
    "kitchen": [("Enamel milk pan", 2450), ("Oak cutting board", 3200), ("Stoneware mug", 1150),
                ("Cast iron skillet", 5400), ("Glass storage jar", 890), ("Bamboo utensil set", 1890)],
    "garden": [("Galvanised watering can", 2990), ("Seed starter tray", 1250), ("Pruning shears", 2275),
               ("Cedar planter box", 6800), ("Kneeling pad", 1475), ("Hanging bird feeder", 1950)],
    "lighting": [("Brass desk lamp", 7900), ("Paper pendant shade", 3450), ("Beeswax taper candles", 950),
                 ("Solar path light", 1799), ("Rechargeable lantern", 4200), ("Linen lamp shade", 2890)],
    "textiles": [("Linen tea towel", 1300), ("Wool throw blanket", 8900), ("Cotton cushion cover", 2100),
                 ("Jute doormat", 2650), ("Waffle bath towel", 2400), ("Quilted oven glove", 1350)],
    "stationery": [("Dot-grid notebook", 1400), ("Fountain pen", 3600), ("Desk organiser", 2750),
                   ("Kraft envelopes", 690), ("Wall planner", 1990), ("Brass paper clips", 480)],
}
ORDERS = 260
SALE = ("lighting", "2024-11", 20)  # (category, month, percent off) of the November sale
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


# --- the database ---------------------------------------------------------------------------------------


def make_rows(seed: int) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows, in insertion order, drawn from one generator seeded with ``seed``."""
    rng = random.Random(f"{seed}:db")
    names = rng.sample([f"{f} {s}" for f in FIRST_NAMES for s in LAST_NAMES], sum(CITIES.values()))
    cities = [city for city, n in CITIES.items() for _ in range(n)]
    rng.shuffle(cities)
    first_day = dt.date(2021, 1, 1)
    customers = [(i, name, city, str(first_day + dt.timedelta(days=rng.randrange(1277))))  # to mid-2024
                 for i, (name, city) in enumerate(zip(names, cities), 1)]

    products = []
    for category, items in PRODUCTS.items():
        for name, price in items:
            stock = 0 if rng.random() < 0.25 else rng.randint(1, 80)
            products.append((len(products) + 1, name, category, price, stock))

    # Some customers order much more often than others.
    weights = [rng.choice([1, 1, 1, 2, 3, 5]) for _ in customers]
    dates = sorted(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(366)) for _ in range(ORDERS))
    orders, items, reviews = [], [], []
    for order_id, day in enumerate(dates, 1):
        customer_id = rng.choices([c[0] for c in customers], weights)[0]
        if day < dt.date(2024, 12, 10):
            status = "cancelled" if rng.random() < 0.12 else "delivered"
        elif day < dt.date(2024, 12, 21):
            status = rng.choices(["shipped", "delivered", "cancelled"], [6, 3, 1])[0]
        else:
            status = rng.choices(["placed", "shipped"], [7, 3])[0]
        orders.append((order_id, customer_id, str(day), status))
        for product in sorted(rng.sample(products, rng.choices([1, 2, 3, 4], [40, 30, 20, 10])[0])):
            product_id, _, category, price, _ = product
            quantity = rng.choices([1, 2, 3, 4], [60, 25, 10, 5])[0]
            if (category, str(day)[:7]) == SALE[:2]:
                price = (price * (100 - SALE[2]) + 50) // 100  # to the nearest cent, halves up
            items.append((order_id, product_id, quantity, price))
            if status == "delivered" and rng.random() < 0.3:
                rating = rng.choices([1, 2, 3, 4, 5], [5, 8, 17, 35, 35])[0]
                reviews.append((product_id, customer_id, rating, str(day + dt.timedelta(days=rng.randint(3, 40)))))
    reviews.sort(key=lambda r: (r[3], r[0], r[1]))
    return {"customers": customers, "products": products, "orders": orders, "order_items": items,
            "reviews": [(i, *r) for i, r in enumerate(reviews, 1)]}


def write_database(path: Path, seed: int) -> None:
    """Write the database to ``path`` (replacing it only once complete)."""
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    con = sqlite3.connect(partial)
    try:
        con.executescript(SCHEMA)
        for table, rows in make_rows(seed).items():
            con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
        con.commit()
        con.execute("VACUUM")  # a compact file with no free pages left over from the inserts
    finally:
        con.close()
    os.replace(partial, path)


# --- the questions ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """A kind of question. ``question``, ``sql`` and ``say`` (the reference's last sentence,
    which may use ``{answer}``) are format strings over each instance's parameters."""

    name: str
    difficulty: int  # 1: one table; 2: a join; 3: a join with grouping, ranking or a subquery
    tables: tuple[str, ...]
    question: str
    sql: str
    say: str
    instances: Callable[[sqlite3.Connection], list[dict[str, str]]]
    ranked: bool = False  # the SQL returns (answer, value) ordered by value, LIMIT 1: ties are skipped


def _column(con: sqlite3.Connection, sql: str) -> list[str]:
    return [str(row[0]) for row in con.execute(sql)]


def cities(con: sqlite3.Connection) -> list[dict[str, str]]:
    return [{"city": c} for c in _column(con, "SELECT DISTINCT city FROM customers ORDER BY city")]


def categories(con: sqlite3.Connection) -> list[dict[str, str]]:
    return [{"category": c} for c in PRODUCTS]


def products(con: sqlite3.Connection) -> list[dict[str, str]]:
    return [{"product": p} for p in _column(con, "SELECT name FROM products ORDER BY id")]


def customers(con: sqlite3.Connection) -> list[dict[str, str]]:
    return [{"customer": c} for c in _column(con, "SELECT name FROM customers ORDER BY id")]


def months(con: sqlite3.Connection) -> list[dict[str, str]]:
    return [{"month": name, "mm": f"{i:02d}"} for i, name in enumerate(MONTHS, 1)]


def quarters(con: sqlite3.Connection) -> list[dict[str, str]]:
    return [{"q": str(q), "first": f"{3 * q - 2:02d}", "last": f"{3 * q:02d}"} for q in (1, 2, 3, 4)]


def orders(con: sqlite3.Connection) -> list[dict[str, str]]:
    return [{"order": o} for o in _column(con, "SELECT id FROM orders WHERE status != 'cancelled' ORDER BY id")]


TEMPLATES = [
    Template("customers-in-city", 1, ("customers",),
             "How many customers live in {city}?",
             "SELECT COUNT(*) FROM customers WHERE city = '{city}'",
             "{answer} customers live in {city}.", cities),
    Template("out-of-stock", 1, ("products",),
             "How many products in the {category} category are out of stock?",
             "SELECT COUNT(*) FROM products WHERE category = '{category}' AND stock = 0",
             "{answer} {category} products have no stock.", categories),
    Template("list-price", 1, ("products",),
             "What is the list price of the {product}, in dollars?",
             "SELECT price_cents / 100.0 FROM products WHERE name = '{product}'",
             "The {product} is listed at ${answer}.", products),
    Template("orders-in-month", 1, ("orders",),
             "How many orders were placed in {month} 2024, whatever their status?",
             "SELECT COUNT(*) FROM orders WHERE ordered_on LIKE '2024-{mm}-%'",
             "{answer} orders were placed in {month} 2024.", months),
    Template("stock-units", 1, ("products",),
             "How many units of stock does the shop hold across all its {category} products?",
             "SELECT SUM(stock) FROM products WHERE category = '{category}'",
             "The {category} products have {answer} units in stock together.", categories),
    Template("joined-in-year", 1, ("customers",),
             "How many customers signed up in {year}?",
             "SELECT COUNT(*) FROM customers WHERE joined_on LIKE '{year}-%'",
             "{answer} customers signed up in {year}.",
             lambda con: [{"year": str(y)} for y in (2021, 2022, 2023, 2024)]),
    Template("customer-orders", 2, ("customers", "orders"),
             "How many orders has {customer} placed, not counting cancelled ones?",
             "SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id "
             "WHERE c.name = '{customer}' AND o.status != 'cancelled'",
             "{customer} has {answer} orders that were not cancelled.", customers),
    Template("units-sold", 2, ("products", "orders", "order_items"),
             "How many units of the {product} were sold in delivered orders?",
             "SELECT COALESCE(SUM(oi.quantity), 0) FROM order_items oi "
             "JOIN orders o ON o.id = oi.order_id JOIN products p ON p.id = oi.product_id "
             "WHERE p.name = '{product}' AND o.status = 'delivered'",
             "{answer} units of the {product} went out in delivered orders.", products),
    Template("average-rating", 2, ("products", "reviews"),
             "What is the average review rating of the {product}, to 2 decimal places?",
             "SELECT AVG(r.rating) FROM reviews r JOIN products p ON p.id = r.product_id WHERE p.name = '{product}'",
             "The {product} has an average rating of {answer}.", products),
    Template("order-value", 2, ("order_items",),
             "What was order {order} worth, in dollars, at the prices the customer paid?",
             "SELECT SUM(quantity * unit_price_cents) / 100.0 FROM order_items WHERE order_id = {order}",
             "Order {order} came to ${answer}.", orders),
    Template("sale-lines", 2, ("products", "order_items"),
             "On how many order lines was the {product} sold below its list price?",
             "SELECT COUNT(*) FROM order_items oi JOIN products p ON p.id = oi.product_id "
             "WHERE p.name = '{product}' AND oi.unit_price_cents < p.price_cents",
             "The {product} sold below its list price on {answer} order lines.",
             lambda con: [{"product": p} for p in _column(
                 con, "SELECT name FROM products WHERE category = 'lighting' ORDER BY id")]),
    Template("month-revenue", 3, ("orders", "order_items"),
             "What was the revenue from delivered orders placed in {month} 2024, in dollars? "
             "Revenue is the quantity times the price paid, summed over the order lines.",
             "SELECT SUM(oi.quantity * oi.unit_price_cents) / 100.0 FROM order_items oi "
             "JOIN orders o ON o.id = oi.order_id WHERE o.status = 'delivered' AND o.ordered_on LIKE '2024-{mm}-%'",
             "Delivered orders from {month} 2024 brought in ${answer}.", months),
    Template("top-spender", 3, ("customers", "orders", "order_items"),
             "Which customer from {city} spent the most on delivered orders? Give their customer id.",
             "SELECT c.id, SUM(oi.quantity * oi.unit_price_cents) AS spent FROM customers c "
             "JOIN orders o ON o.customer_id = c.id JOIN order_items oi ON oi.order_id = o.id "
             "WHERE c.city = '{city}' AND o.status = 'delivered' GROUP BY c.id ORDER BY spent DESC LIMIT 1",
             "Customer {answer} spent the most of anyone in {city}.", cities, ranked=True),
    Template("best-seller", 3, ("products", "orders", "order_items"),
             "Which {category} product sold the most units in delivered orders? Give its product id.",
             "SELECT p.id, SUM(oi.quantity) AS units FROM products p "
             "JOIN order_items oi ON oi.product_id = p.id JOIN orders o ON o.id = oi.order_id "
             "WHERE p.category = '{category}' AND o.status = 'delivered' GROUP BY p.id ORDER BY units DESC LIMIT 1",
             "Product {answer} is the best-selling {category} product.", categories, ranked=True),
    Template("cancel-rate", 3, ("orders",),
             "What percentage of the orders placed in quarter {q} of 2024 (months {first} to {last}) were "
             "cancelled? Give the percentage to 2 decimal places.",
             "SELECT 100.0 * SUM(status = 'cancelled') / COUNT(*) FROM orders "
             "WHERE substr(ordered_on, 6, 2) BETWEEN '{first}' AND '{last}'",
             "{answer}% of the orders placed in quarter {q} were cancelled.", quarters),
    Template("average-order", 3, ("customers", "orders", "order_items"),
             "What is the average value, in dollars, of a delivered order placed by a customer from {city}? "
             "Give it to 2 decimal places.",
             "SELECT AVG(total) / 100.0 FROM (SELECT SUM(oi.quantity * oi.unit_price_cents) AS total "
             "FROM orders o JOIN customers c ON c.id = o.customer_id JOIN order_items oi ON oi.order_id = o.id "
             "WHERE c.city = '{city}' AND o.status = 'delivered' GROUP BY o.id)",
             "A delivered order from {city} is worth ${answer} on average.", cities),
]


def answer_text(value: object) -> str | None:
    """The answer as written in the task: integers as they are, other numbers to 2 decimal
    places (halves up). None when there is no answer, or when its rounding is a toss-up (the
    exact value ends in half a cent), so that an answer rounded either way is not wrong."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    assert isinstance(value, float), value
    if abs((value * 100) % 1 - 0.5) < 1e-6:
        return None
    return str(Decimal(repr(value)).quantize(Decimal("0.01"), ROUND_HALF_UP))


def call(index: int, name: str, arguments: dict[str, str]) -> dict[str, object]:
    return {"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": arguments}}


def reference(template: Template, sql: str, say: str, answer: str) -> list[dict[str, object]]:
    """The assistant turns of a worked solution: look around, query, answer."""
    describe = [call(2 + i, "describe_table", {"table": t}) for i, t in enumerate(template.tables)]
    return [
        {"role": "assistant", "content": None, "tool_calls": [call(1, "list_tables", {})]},
        {"role": "assistant", "content": None, "tool_calls": describe},
        {"role": "assistant", "content": None, "tool_calls": [call(2 + len(describe), "run_sql", {"query": sql})]},
        {"role": "assistant", "content": f"{say}\n\n\\boxed{{{answer}}}"},
    ]


def instances(con: sqlite3.Connection, template: Template) -> Iterator[dict[str, object]]:
    """Every usable question of ``template``: with a unique, unambiguous answer."""
    for params in template.instances(con):
        assert not any("'" in v for v in params.values()), params  # the SQL quotes values as they are
        sql = template.sql.format(**params)
        rows = con.execute(sql).fetchall()
        if template.ranked:
            top_two = con.execute(sql.replace("LIMIT 1", "LIMIT 2")).fetchall()
            if len(top_two) == 2 and top_two[0][1] == top_two[1][1]:
                continue  # a tie: "which one" has two answers
        answer = answer_text(rows[0][0]) if rows else None
        if answer is None:
            continue
        say = template.say.format(answer=answer, **params)
        yield {"prompt": template.question.format(**params), "answer": answer, "difficulty": template.difficulty,
               "template": template.name, "sql": sql, "reference": reference(template, sql, say, answer)}


def make_tasks(db: Path, seed: int) -> dict[str, list[dict[str, object]]]:
    """The splits' rows. Each template's questions are shuffled, then dealt round-robin (the
    templates in a fresh order each round) to test, dev and train, in that order: every
    split gets a spread of templates and difficulties, and no question is in two splits."""
    rng = random.Random(f"{seed}:tasks")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        pools = []
        for template in TEMPLATES:
            pool = list(instances(con, template))
            rng.shuffle(pool)
            pools.append(pool)
    finally:
        con.close()
    dealt: list[dict[str, object]] = []
    while any(pools) and len(dealt) < sum(SIZES.values()):
        for pool in rng.sample(pools, len(pools)):
            if pool:
                dealt.append(pool.pop())
    splits, start = {}, 0
    for split, n in SIZES.items():
        rows = dealt[start:start + n]
        start += n
        splits[split] = [{"id": f"shop-{split}-{i:03d}", **row} for i, row in enumerate(rows, 1)]
    return splits


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="default: %(default)s")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent,
                        help="directory to write state/ and tasks/ under (default: beside this script)")
    args = parser.parse_args(argv)

    (args.out / "state").mkdir(parents=True, exist_ok=True)
    (args.out / "tasks").mkdir(parents=True, exist_ok=True)
    db = args.out / "state" / "shop.sqlite"
    write_database(db, args.seed)
    print(f"database: {db}\n  sha256 = {hashlib.sha256(db.read_bytes()).hexdigest()} (SQLite {sqlite3.sqlite_version})")
    for split, rows in make_tasks(db, args.seed).items():
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
        path = args.out / "tasks" / f"{split}.jsonl"
        path.write_bytes(data)
        # In the form of envhub.toml's [tasks.splits.*], to paste there if the data changed.
        print(f"{split}: {path}\n  rows = {len(rows)}\n  sha256 = \"{hashlib.sha256(data).hexdigest()}\"")


if __name__ == "__main__":
    main()
