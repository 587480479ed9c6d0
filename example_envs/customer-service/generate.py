#!/usr/bin/env python3
"""Build the database and the tasks of ``envhub-examples/customer-service``.

    python generate.py               # rewrite state/retail.sqlite and tasks/{train,dev,test}.jsonl
    python generate.py --out /tmp/x  # write them under /tmp/x instead

Standard library only, no randomness: the shop (eight customers, fifteen items of five
products, sixteen orders) and the twelve tasks are written out below, so the task files come
out byte for byte identical and ``envhub validate`` can check the digests in ``envhub.toml``.

Each task is one customer's conversation with the support desk: what they say first
(``prompt``), who they are and what they want (``user.instructions``, the LLM customer's
system prompt), what the scripted customer answers to each of the agent's messages
(``user.script``), the facts the agent must tell them (``facts``), whether the right move is a
transfer to a human (``expect_transfer``), and a worked solution (``reference``: the agent's
turns, tool calls included, written against the script). The expected database is not
written down: the verifier replays the reference's tool calls on a fresh copy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

SCHEMA = """\
CREATE TABLE customers (
    id TEXT PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL, email TEXT NOT NULL UNIQUE,
    address1 TEXT NOT NULL, city TEXT NOT NULL, state TEXT NOT NULL, zip TEXT NOT NULL
);
CREATE TABLE payment_methods (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers(id),
    kind TEXT NOT NULL,          -- credit card, gift card or paypal
    balance_cents INTEGER        -- gift cards only
);
CREATE TABLE items (
    id TEXT PRIMARY KEY, product TEXT NOT NULL, options TEXT NOT NULL, price_cents INTEGER NOT NULL,
    available INTEGER NOT NULL   -- 1: in stock
);
CREATE TABLE orders (
    id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers(id),
    status TEXT NOT NULL,        -- pending, processed, delivered, cancelled, return requested, exchange requested
    payment_method_id TEXT NOT NULL REFERENCES payment_methods(id),
    address1 TEXT NOT NULL, city TEXT NOT NULL, state TEXT NOT NULL, zip TEXT NOT NULL,
    cancel_reason TEXT
);
CREATE TABLE order_items (
    order_id TEXT NOT NULL REFERENCES orders(id), line INTEGER NOT NULL, item_id TEXT NOT NULL REFERENCES items(id),
    status TEXT NOT NULL DEFAULT 'ordered',  -- ordered, return requested, exchange requested
    new_item_id TEXT REFERENCES items(id),   -- what an exchange gives instead
    PRIMARY KEY (order_id, line)
);
CREATE TABLE refunds (  -- a negative amount is a charge (an exchange for a dearer item)
    id INTEGER PRIMARY KEY, order_id TEXT NOT NULL REFERENCES orders(id),
    payment_method_id TEXT NOT NULL REFERENCES payment_methods(id), amount_cents INTEGER NOT NULL
);
"""

CUSTOMERS = [
    ("C01", "Ava", "Lopez", "ava.lopez@example.com", "12 Elm St", "New York", "NY", "10001"),
    ("C02", "Ben", "Carter", "ben.carter@example.com", "88 Fell St", "San Francisco", "CA", "94103"),
    ("C03", "Chloe", "Nguyen", "chloe.nguyen@example.com", "4 Lake Shore Dr", "Chicago", "IL", "60601"),
    ("C04", "Dev", "Patel", "dev.patel@example.com", "310 Congress Ave", "Austin", "TX", "73301"),
    ("C05", "Emma", "Rossi", "emma.rossi@example.com", "9 Pike St", "Seattle", "WA", "98101"),
    ("C06", "Femi", "Adeyemi", "femi.adeyemi@example.com", "21 Beacon St", "Boston", "MA", "02108"),
    ("C07", "Grace", "Kim", "grace.kim@example.com", "75 Peachtree St", "Atlanta", "GA", "30301"),
    ("C08", "Hugo", "Silva", "hugo.silva@example.com", "600 Brickell Ave", "Miami", "FL", "33101"),
]
PAYMENT_METHODS = [
    ("card_1101", "C01", "credit card", None), ("gift_1102", "C01", "gift card", 5000),
    ("card_2201", "C02", "credit card", None), ("paypal_2202", "C02", "paypal", None),
    ("card_3301", "C03", "credit card", None),
    ("card_4401", "C04", "credit card", None), ("gift_4402", "C04", "gift card", 2000),
    ("paypal_5501", "C05", "paypal", None),
    ("card_6601", "C06", "credit card", None),
    ("card_7701", "C07", "credit card", None), ("gift_7702", "C07", "gift card", 1000),
    ("card_8801", "C08", "credit card", None),
]
ITEMS = [
    ("1001", "T-shirt", "color: blue, size: M", 2000, 1), ("1002", "T-shirt", "color: blue, size: L", 2000, 1),
    ("1003", "T-shirt", "color: red, size: M", 2000, 0), ("1004", "T-shirt", "color: red, size: L", 2200, 1),
    ("2001", "Water bottle", "capacity: 500 ml, color: green", 1500, 1),
    ("2002", "Water bottle", "capacity: 750 ml, color: green", 1800, 1),
    ("2003", "Water bottle", "capacity: 750 ml, color: black", 1800, 0),
    ("3001", "Desk lamp", "finish: brass", 4500, 1), ("3002", "Desk lamp", "finish: black", 4200, 1),
    ("4001", "Headphones", "type: over-ear, color: black", 9900, 1),
    ("4002", "Headphones", "type: over-ear, color: white", 9900, 1),
    ("4003", "Headphones", "type: in-ear, color: black", 5900, 1),
    ("5001", "Running shoes", "size: 9, color: grey", 8000, 1),
    ("5002", "Running shoes", "size: 10, color: grey", 8000, 1),
    ("5003", "Running shoes", "size: 10, color: blue", 8500, 1),
]
# id, customer, status, payment method, items (the address is the customer's)
ORDERS = [
    ("#W1001", "C01", "pending", "card_1101", ["1001", "2001"]),
    ("#W1002", "C01", "delivered", "card_1101", ["3001"]),
    ("#W1003", "C02", "delivered", "card_2201", ["5001", "2002"]),
    ("#W1004", "C02", "pending", "paypal_2202", ["4001"]),
    ("#W1005", "C03", "delivered", "card_3301", ["4001", "1002"]),
    ("#W1006", "C03", "pending", "card_3301", ["3002"]),
    ("#W1007", "C04", "pending", "card_4401", ["5003"]),
    ("#W1008", "C04", "pending", "card_4401", ["1004", "2002"]),
    ("#W1009", "C05", "delivered", "paypal_5501", ["1001", "1002"]),
    ("#W1010", "C05", "processed", "paypal_5501", ["3001"]),
    ("#W1011", "C06", "delivered", "card_6601", ["4002"]),
    ("#W1012", "C07", "delivered", "card_7701", ["2001", "2002", "3002"]),
    ("#W1013", "C07", "pending", "card_7701", ["4003"]),
    ("#W1014", "C08", "pending", "card_8801", ["5002"]),
    ("#W1015", "C08", "delivered", "card_8801", ["4003"]),
    ("#W1016", "C03", "cancelled", "card_3301", ["2003"]),
]


def write_database(path: Path) -> None:
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.executescript(SCHEMA)
        con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?, ?)", CUSTOMERS)
        con.executemany("INSERT INTO payment_methods VALUES (?, ?, ?, ?)", PAYMENT_METHODS)
        con.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?)", ITEMS)
        address = {c[0]: c[4:8] for c in CUSTOMERS}
        for order_id, customer, status, method, items in ORDERS:
            cancelled = "no longer needed" if status == "cancelled" else None
            con.execute("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (order_id, customer, status, method, *address[customer], cancelled))
            con.executemany("INSERT INTO order_items (order_id, line, item_id) VALUES (?, ?, ?)",
                            [(order_id, line, item) for line, item in enumerate(items, 1)])
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()


# --- the tasks --------------------------------------------------------------------------------

_calls = 0  # call ids are unique within a run of this script


def tools(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """An assistant turn making these tool calls."""
    global _calls
    out = []
    for name, arguments in calls:
        _calls += 1
        out.append({"id": f"call_{_calls}", "type": "function", "function": {"name": name, "arguments": arguments}})
    return {"role": "assistant", "content": None, "tool_calls": out}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def task(split: str, number: int, prompt: str, instructions: str, script: list[str], reference: list[dict[str, Any]],
         facts: list[str] = (), expect_transfer: bool = False, kind: str = "") -> dict[str, Any]:  # type: ignore[assignment]
    said = sum(1 for turn in reference if not turn.get("tool_calls"))
    # The agent has the last word, or transfers the customer after their last line.
    assert said == len(script) + (0 if expect_transfer else 1), (split, number, said, len(script))
    row: dict[str, Any] = {"id": f"cs-{split}-{number:02d}", "kind": kind, "prompt": prompt,
                           "user": {"instructions": instructions, "script": script}, "facts": list(facts)}
    if expect_transfer:
        row["expect_transfer"] = True
    row["reference"] = reference
    return row


def make_tasks() -> dict[str, list[dict[str, Any]]]:
    email = "find_customer_by_email"
    train = [
        task("train", 1, "Hi, I'd like to cancel an order. My email is ava.lopez@example.com.",
             "You are Ava Lopez (email ava.lopez@example.com). You want to cancel your order #W1001 (a blue "
             "T-shirt and a water bottle) because you no longer need it. Confirm when asked.",
             ["It's order #W1001, I no longer need it.", "Yes, please go ahead."],
             [tools((email, {"email": "ava.lopez@example.com"})),
              tools(("get_customer", {"customer_id": "C01"})),
              say("Thanks, Ava. Which order would you like to cancel, and why?"),
              tools(("get_order", {"order_id": "#W1001"})),
              say("Order #W1001 is pending: a blue T-shirt and a green water bottle, $35.00 in all, refunded to "
                  "your credit card card_1101. Shall I cancel it, reason 'no longer needed'? (yes/no)"),
              tools(("cancel_order", {"order_id": "#W1001", "reason": "no longer needed"})),
              say("Done: order #W1001 is cancelled and $35.00 will be refunded to your credit card.")],
             facts=["35.00"], kind="cancel"),
        task("train", 2, "Hello, the running shoes I got are too small. Can I exchange them for a bigger size?",
             "You are Ben Carter, zip code 94103. Your order #W1003 was delivered with grey running shoes in size 9; "
             "you want the same shoes in size 10, same color. Pay any difference with your credit card.",
             ["Ben Carter, zip 94103. It's order #W1003.", "Yes, size 10 in grey, on my credit card."],
             [say("I can help with that. Please tell me your first and last name and zip code, and the order number."),
              tools(("find_customer_by_name_zip", {"first_name": "Ben", "last_name": "Carter", "zip": "94103"}),
                    ("get_order", {"order_id": "#W1003"})),
              tools(("list_product_variants", {"product": "Running shoes"})),
              say("Your order #W1003 has Running shoes, size 9, grey (item 5001). Size 10 grey (item 5002) is "
                  "available at the same price, so there is no difference to pay. Shall I request the exchange, "
                  "settled on your credit card card_2201? (yes/no)"),
              tools(("exchange_items", {"order_id": "#W1003", "item_ids": ["5001"], "new_item_ids": ["5002"],
                                        "payment_method_id": "card_2201"})),
              say("The exchange is requested: send back the size 9 pair and you will get size 10 in grey.")],
             kind="exchange"),
        task("train", 3, "I want to return the headphones from my last order. My email: chloe.nguyen@example.com",
             "You are Chloe Nguyen (chloe.nguyen@example.com). From order #W1005 you want to return the black "
             "over-ear headphones only (keep the T-shirt), refunded to your credit card.",
             ["Order #W1005. Just the headphones, refund to my card please.", "Yes."],
             [tools((email, {"email": "chloe.nguyen@example.com"})),
              say("Found you, Chloe. Which order are they from, and where should the refund go?"),
              tools(("get_order", {"order_id": "#W1005"})),
              say("Order #W1005 was delivered. Returning the black over-ear headphones (item 4001) gives a refund "
                  "of $99.00 to your credit card card_3301. Confirm? (yes/no)"),
              tools(("return_items", {"order_id": "#W1005", "item_ids": ["4001"], "payment_method_id": "card_3301"})),
              say("The return is requested: $99.00 will go back to your card once the headphones arrive.")],
             facts=["99.00"], kind="return"),
        task("train", 4, "Hi, please cancel my order #W1010, I'm emma.rossi@example.com.",
             "You are Emma Rossi (emma.rossi@example.com). You want to cancel order #W1010 (a desk lamp) because "
             "you ordered it by mistake. If it cannot be cancelled, accept that and end the conversation.",
             ["Oh well, I understand. Thanks."],
             [tools((email, {"email": "emma.rossi@example.com"})),
              tools(("get_order", {"order_id": "#W1010"})),
              say("I'm sorry, Emma: order #W1010 has already been processed for shipping, so it can no longer be "
                  "cancelled. Once it is delivered you can return it."),
              say("You're welcome. Have a good day!")],
             facts=["processed"], kind="refuse"),
        task("train", 5, "I need to change the shipping address on my pending order. ben.carter@example.com",
             "You are Ben Carter (ben.carter@example.com). Your pending order #W1004 (headphones) should go to your "
             "new address: 500 Market St, San Francisco, CA 94105. Confirm when asked.",
             ["Order #W1004, new address 500 Market St, San Francisco, CA 94105.", "Yes, correct."],
             [tools((email, {"email": "ben.carter@example.com"})),
              say("Thanks, Ben. Which order, and what is the new address?"),
              tools(("get_order", {"order_id": "#W1004"})),
              say("Order #W1004 is pending. I'll change its shipping address to 500 Market St, San Francisco, CA "
                  "94105. Is that right? (yes/no)"),
              tools(("modify_order_address", {"order_id": "#W1004", "address1": "500 Market St",
                                              "city": "San Francisco", "state": "CA", "zip": "94105"})),
              say("Done: order #W1004 will ship to 500 Market St, San Francisco, CA 94105.")],
             kind="address"),
        task("train", 6, "How much did I pay for the headphones in order #W1015? I'm Hugo Silva, zip 33101.",
             "You are Hugo Silva, zip 33101. You want to know the price you paid for the headphones in order "
             "#W1015. You do not want to change anything.",
             ["Great, that's all I needed."],
             [tools(("find_customer_by_name_zip", {"first_name": "Hugo", "last_name": "Silva", "zip": "33101"}),
                    ("get_order", {"order_id": "#W1015"})),
              say("Order #W1015 has in-ear headphones in black, and you paid $59.00 for them."),
              say("Glad to help, Hugo!")],
             facts=["59.00"], kind="information"),
    ]
    dev = [
        task("dev", 1, "Hi, I ordered something by mistake and want to cancel it. dev.patel@example.com",
             "You are Dev Patel (dev.patel@example.com). You have two pending orders; you want to cancel the one "
             "with the red T-shirt and the water bottle (#W1008, but you do not remember its number), because you "
             "ordered it by mistake. Keep the running shoes order.",
             ["The one with the T-shirt and the water bottle. I ordered it by mistake.", "Yes, cancel it."],
             [tools((email, {"email": "dev.patel@example.com"})),
              tools(("get_customer", {"customer_id": "C04"})),
              say("Thanks, Dev. You have two pending orders, #W1007 and #W1008. Which one should I cancel, and why?"),
              tools(("get_order", {"order_id": "#W1007"}), ("get_order", {"order_id": "#W1008"})),
              say("That is order #W1008 (a red T-shirt and a water bottle), $40.00 refunded to your credit card "
                  "card_4401. Cancel it, reason 'ordered by mistake'? (yes/no)"),
              tools(("cancel_order", {"order_id": "#W1008", "reason": "ordered by mistake"})),
              say("Order #W1008 is cancelled; $40.00 will be refunded to your card. Your shoes order is unchanged.")],
             facts=["40.00"], kind="cancel"),
        task("dev", 2, "Can I swap a T-shirt for another color? emma.rossi@example.com",
             "You are Emma Rossi (emma.rossi@example.com). In order #W1009 you want to exchange the blue T-shirt in "
             "size M for a red one in size L. Pay any difference with PayPal.",
             ["Order #W1009, the blue M one, for a red L. PayPal is fine.", "Yes, go ahead."],
             [tools((email, {"email": "emma.rossi@example.com"})),
              say("Sure, Emma. Which order and which T-shirt, and what would you like instead?"),
              tools(("get_order", {"order_id": "#W1009"}), ("list_product_variants", {"product": "T-shirt"})),
              say("The red T-shirt in size L (item 1004) is available at $22.00, $2.00 more than your blue M "
                  "(item 1001). I'd charge the $2.00 to your PayPal paypal_5501. Proceed? (yes/no)"),
              tools(("exchange_items", {"order_id": "#W1009", "item_ids": ["1001"], "new_item_ids": ["1004"],
                                        "payment_method_id": "paypal_5501"})),
              say("The exchange is requested; $2.00 will be charged to your PayPal.")],
             facts=["2.00"], kind="exchange"),
        task("dev", 3, "I returned nothing yet but I want a refund for my headphones to my bank account. "
                       "femi.adeyemi@example.com",
             "You are Femi Adeyemi (femi.adeyemi@example.com). You want to return the headphones of order #W1011 "
             "and get the money paid into your bank account (not your card); you insist on the bank account.",
             ["Order #W1011. It has to be my bank account, not the card."],
             [tools((email, {"email": "femi.adeyemi@example.com"})),
              say("Which order are the headphones from?"),
              tools(("get_order", {"order_id": "#W1011"})),
              tools(("transfer_to_human", {"summary": "Femi Adeyemi (C06) wants to return the headphones of "
                                                      "#W1011 with the refund paid into a bank account, which I "
                                                      "cannot do."}))],
             expect_transfer=True, kind="transfer"),
        task("dev", 4, "Hello, I want to return two water bottles. grace.kim@example.com",
             "You are Grace Kim (grace.kim@example.com). From order #W1012 you want to return both water bottles "
             "(keep the desk lamp) and have the refund put on your gift card.",
             ["Order #W1012, both bottles, refund to my gift card.", "Yes."],
             [tools((email, {"email": "grace.kim@example.com"})),
              say("Happy to help, Grace. Which order, and where should the refund go?"),
              tools(("get_order", {"order_id": "#W1012"}), ("get_customer", {"customer_id": "C07"})),
              say("Returning the two water bottles of #W1012 (items 2001 and 2002) refunds $33.00 to your gift card "
                  "gift_7702. Confirm? (yes/no)"),
              tools(("return_items", {"order_id": "#W1012", "item_ids": ["2001", "2002"],
                                      "payment_method_id": "gift_7702"})),
              say("The return is requested; $33.00 will be added to your gift card once the bottles arrive.")],
             facts=["33.00"], kind="return"),
    ]
    test = [
        task("test", 1, "Please cancel order #W1014, I ordered it by mistake. Hugo Silva, 33101.",
             "You are Hugo Silva, zip 33101. You want to cancel order #W1014 (running shoes): ordered by mistake.",
             ["Yes, cancel it."],
             [tools(("find_customer_by_name_zip", {"first_name": "Hugo", "last_name": "Silva", "zip": "33101"}),
                    ("get_order", {"order_id": "#W1014"})),
              say("Order #W1014 (running shoes, $80.00) is pending. Cancel it, reason 'ordered by mistake', with "
                  "$80.00 refunded to your card card_8801? (yes/no)"),
              tools(("cancel_order", {"order_id": "#W1014", "reason": "ordered by mistake"})),
              say("Order #W1014 is cancelled; $80.00 will be refunded to your card.")],
             facts=["80.00"], kind="cancel"),
        task("test", 2, "My in-ear headphones order should go to my office instead. grace.kim@example.com",
             "You are Grace Kim (grace.kim@example.com). Your pending order #W1013 should ship to your office: "
             "1 Centennial Olympic Park Dr, Atlanta, GA 30313.",
             ["1 Centennial Olympic Park Dr, Atlanta, GA 30313.", "Yes."],
             [tools((email, {"email": "grace.kim@example.com"}), ("get_customer", {"customer_id": "C07"})),
              tools(("get_order", {"order_id": "#W1013"})),
              say("Order #W1013 is pending, so its address can change. What is the office address?"),
              say("I'll ship #W1013 to 1 Centennial Olympic Park Dr, Atlanta, GA 30313. Correct? (yes/no)"),
              tools(("modify_order_address", {"order_id": "#W1013", "address1": "1 Centennial Olympic Park Dr",
                                              "city": "Atlanta", "state": "GA", "zip": "30313"})),
              say("Done: #W1013 will ship to your office.")],
             kind="address"),
    ]
    return {"train": train, "dev": dev, "test": test}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent,
                        help="directory to write state/ and tasks/ under (default: beside this script)")
    args = parser.parse_args(argv)
    (args.out / "state").mkdir(parents=True, exist_ok=True)
    (args.out / "tasks").mkdir(parents=True, exist_ok=True)
    db = args.out / "state" / "retail.sqlite"
    write_database(db)
    print(f"database: {db}")
    for split, rows in make_tasks().items():
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
        path = args.out / "tasks" / f"{split}.jsonl"
        path.write_bytes(data)
        print(f"{split}: {path}\n  rows = {len(rows)}\n  sha256 = \"{hashlib.sha256(data).hexdigest()}\"")


if __name__ == "__main__":
    main()
