"""The tools of ``envhub-examples/customer-service``: a retail support desk's actions on the
shop's SQLite database.

Each tool is a plain function; envhub builds its JSON schema from the signature and the
docstring. The parameter annotated ``State[sqlite3.Connection]`` is hidden from the model and
receives the episode's private copy of the database. It is named ``db``, and state is injected
by that annotation, never by name: :func:`modify_order_address` has a parameter ``state`` (a US
state of the address) that the model must see and fill in.

The tools enforce the shop's hard rules (an order is cancelled only while pending, returned
or exchanged only once delivered, an exchange keeps the product); what a tool raises reaches
the model as ``Error: ...`` and the conversation goes on. The softer rules (make sure who the
customer is, confirm before changing anything) are in the system prompt: the verifier sees
their effect on the database.

Money is in whole cents in the database and in dollars with two decimals in what tools say.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from envhub.runtime import Reply, State, ToolError

__all__ = ["CANCEL_REASONS", "TOOLS", "cancel_order", "exchange_items", "find_customer_by_email",
           "find_customer_by_name_zip", "get_customer", "get_item", "get_order", "list_product_variants",
           "modify_order_address", "return_items", "transfer_to_human"]

#: The reasons cancel_order accepts, as the customer must give one.
CANCEL_REASONS = ("no longer needed", "ordered by mistake")


def find_customer_by_email(email: str, *, db: State[sqlite3.Connection]) -> str:
    """Find a customer's id by their email address.

    Args:
        email: the customer's email address, e.g. "jane.doe@example.com".
    """
    row = db.execute("SELECT id FROM customers WHERE email = ? COLLATE NOCASE", (email.strip(),)).fetchone()
    if row is None:
        raise ToolError(f"no customer has the email {email!r}")
    return str(row[0])


def find_customer_by_name_zip(first_name: str, last_name: str, zip: str, *, db: State[sqlite3.Connection]) -> str:
    """Find a customer's id by their first name, last name and zip code.

    Args:
        first_name: e.g. "Jane".
        last_name: e.g. "Doe".
        zip: the zip code of the customer's default address, e.g. "10001".
    """
    row = db.execute("SELECT id FROM customers WHERE first_name = ? COLLATE NOCASE AND last_name = ? "
                     "COLLATE NOCASE AND zip = ?", (first_name.strip(), last_name.strip(), zip.strip())).fetchone()
    if row is None:
        raise ToolError("no customer has that name and zip code")
    return str(row[0])


def get_customer(customer_id: str, *, db: State[sqlite3.Connection]) -> str:
    """A customer's details: name, email, default address, payment methods and orders (JSON).

    Args:
        customer_id: the id find_customer_by_email or find_customer_by_name_zip returned, e.g. "C01".
    """
    row = db.execute("SELECT id, first_name, last_name, email, address1, city, state, zip FROM customers "
                     "WHERE id = ?", (customer_id,)).fetchone()
    if row is None:
        raise ToolError(f"no customer {customer_id!r}")
    methods = [{"id": m[0], "kind": m[1], **({"balance": _dollars(m[2])} if m[2] is not None else {})}
               for m in db.execute("SELECT id, kind, balance_cents FROM payment_methods WHERE customer_id = ? "
                                   "ORDER BY id", (customer_id,))]
    orders = [r[0] for r in db.execute("SELECT id FROM orders WHERE customer_id = ? ORDER BY id", (customer_id,))]
    return json.dumps({"id": row[0], "name": f"{row[1]} {row[2]}", "email": row[3],
                       "address": {"address1": row[4], "city": row[5], "state": row[6], "zip": row[7]},
                       "payment_methods": methods, "orders": orders})


def get_order(order_id: str, *, db: State[sqlite3.Connection]) -> str:
    """An order's details: status, items (with their item ids and prices), total, shipping
    address and payment method (JSON).

    Args:
        order_id: e.g. "#W1001" (the "#" may be left out).
    """
    order = _order(db, order_id)
    lines = db.execute("SELECT oi.item_id, i.product, i.options, i.price_cents, oi.status, oi.new_item_id "
                       "FROM order_items oi JOIN items i ON i.id = oi.item_id WHERE oi.order_id = ? ORDER BY oi.line",
                       (order["id"],)).fetchall()
    items = [{"item_id": r[0], "product": r[1], "options": r[2], "price": _dollars(r[3]), "status": r[4],
              **({"exchange_for": r[5]} if r[5] else {})} for r in lines]
    return json.dumps({"id": order["id"], "customer_id": order["customer_id"], "status": order["status"],
                       "items": items, "total": _dollars(sum(r[3] for r in lines)),
                       "address": {k: order[k] for k in ("address1", "city", "state", "zip")},
                       "payment_method_id": order["payment_method_id"]})


def get_item(item_id: str, *, db: State[sqlite3.Connection]) -> str:
    """An item's product, options, price and whether it is available (JSON).

    Args:
        item_id: e.g. "1001".
    """
    row = db.execute("SELECT id, product, options, price_cents, available FROM items WHERE id = ?",
                     (item_id,)).fetchone()
    if row is None:
        raise ToolError(f"no item {item_id!r}")
    return json.dumps(_item(row))


def list_product_variants(product: str, *, db: State[sqlite3.Connection]) -> str:
    """Every item (variant) of a product, with options, price and availability (JSON).

    Args:
        product: the product's name, as get_order or get_item show it, e.g. "T-shirt".
    """
    rows = db.execute("SELECT id, product, options, price_cents, available FROM items WHERE product = ? "
                      "COLLATE NOCASE ORDER BY id", (product.strip(),)).fetchall()
    if not rows:
        products = [r[0] for r in db.execute("SELECT DISTINCT product FROM items ORDER BY product")]
        raise ToolError(f"no product {product!r}; the products are: {', '.join(products)}")
    return json.dumps([_item(r) for r in rows])


def cancel_order(order_id: str, reason: str, *, db: State[sqlite3.Connection]) -> str:
    """Cancel a pending order; its total is refunded to the order's payment method.

    Args:
        order_id: e.g. "#W1001".
        reason: "no longer needed" or "ordered by mistake".
    """
    order = _order(db, order_id)
    if order["status"] != "pending":
        raise ToolError(f"order {order['id']} is {order['status']}; only pending orders can be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError(f"reason must be one of {', '.join(map(repr, CANCEL_REASONS))}")
    total = _total(db, order["id"])
    with db:
        db.execute("UPDATE orders SET status = 'cancelled', cancel_reason = ? WHERE id = ?", (reason, order["id"]))
        db.execute("INSERT INTO refunds (order_id, payment_method_id, amount_cents) VALUES (?, ?, ?)",
                   (order["id"], order["payment_method_id"], total))
    return f"Order {order['id']} is cancelled; {_dollars(total)} will be refunded to {order['payment_method_id']}."


def return_items(order_id: str, item_ids: list[str], payment_method_id: str, *, db: State[sqlite3.Connection]) -> str:
    """Request the return of items of a delivered order; their price is refunded to the
    order's payment method or one of the customer's gift cards.

    Args:
        order_id: e.g. "#W1001".
        item_ids: the item ids to return, as get_order shows them, e.g. ["1001"].
        payment_method_id: where the refund goes: the order's payment method or a gift card.
    """
    order = _order(db, order_id)
    _delivered(order, "returned")
    lines = _lines(db, order["id"], item_ids)
    _refund_method(db, order, payment_method_id)
    amount = sum(price for _, price in lines)
    with db:
        for line, _ in lines:
            db.execute("UPDATE order_items SET status = 'return requested' WHERE order_id = ? AND line = ?",
                       (order["id"], line))
        db.execute("UPDATE orders SET status = 'return requested' WHERE id = ?", (order["id"],))
        db.execute("INSERT INTO refunds (order_id, payment_method_id, amount_cents) VALUES (?, ?, ?)",
                   (order["id"], payment_method_id, amount))
    return (f"Return of {len(lines)} item(s) of {order['id']} requested; {_dollars(amount)} will be refunded to "
            f"{payment_method_id} once they arrive.")


def exchange_items(order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str,
                   *, db: State[sqlite3.Connection]) -> str:
    """Exchange items of a delivered order for other variants of the same products; the price
    difference is refunded to, or charged from, the payment method given.

    Args:
        order_id: e.g. "#W1001".
        item_ids: the item ids to exchange, as get_order shows them.
        new_item_ids: the available item ids to get instead, in the same order (same product each).
        payment_method_id: the customer's payment method for the price difference.
    """
    order = _order(db, order_id)
    _delivered(order, "exchanged")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("item_ids and new_item_ids must have the same length")
    lines = _lines(db, order["id"], item_ids)
    _own_method(db, order, payment_method_id)
    difference = 0
    for item_id, new_id, (_, price) in zip(item_ids, new_item_ids, lines, strict=True):
        old = db.execute("SELECT product FROM items WHERE id = ?", (item_id,)).fetchone()
        new = db.execute("SELECT product, price_cents, available FROM items WHERE id = ?", (new_id,)).fetchone()
        if new is None:
            raise ToolError(f"no item {new_id!r}")
        if new[0] != old[0]:
            raise ToolError(f"item {new_id} is a {new[0]}, not a {old[0]}: an exchange keeps the product")
        if not new[2]:
            raise ToolError(f"item {new_id} is not available")
        difference += new[1] - price
    with db:
        for (line, _), new_id in zip(lines, new_item_ids, strict=True):
            db.execute("UPDATE order_items SET status = 'exchange requested', new_item_id = ? "
                       "WHERE order_id = ? AND line = ?", (new_id, order["id"], line))
        db.execute("UPDATE orders SET status = 'exchange requested' WHERE id = ?", (order["id"],))
        db.execute("INSERT INTO refunds (order_id, payment_method_id, amount_cents) VALUES (?, ?, ?)",
                   (order["id"], payment_method_id, -difference))
    settled = (f"{_dollars(difference)} will be charged to" if difference > 0 else
               f"{_dollars(-difference)} will be refunded to")
    return f"Exchange of {len(lines)} item(s) of {order['id']} requested; {settled} {payment_method_id}."


def modify_order_address(order_id: str, address1: str, city: str, state: str, zip: str, *,
                         db: State[sqlite3.Connection]) -> str:
    """Change the shipping address of a pending order.

    Args:
        order_id: e.g. "#W1001".
        address1: street and number, e.g. "500 Market St".
        city: e.g. "San Francisco".
        state: the US state, two letters, e.g. "CA".
        zip: e.g. "94105".
    """
    order = _order(db, order_id)
    if order["status"] != "pending":
        raise ToolError(f"order {order['id']} is {order['status']}; only a pending order's address can change")
    if len(state) != 2 or not state.isalpha():
        raise ToolError(f"state must be a two-letter US state code, got {state!r}")
    with db:
        db.execute("UPDATE orders SET address1 = ?, city = ?, state = ?, zip = ? WHERE id = ?",
                   (address1.strip(), city.strip(), state.upper(), zip.strip(), order["id"]))
    return f"The shipping address of {order['id']} is now {address1}, {city}, {state.upper()} {zip}."


def transfer_to_human(summary: str) -> Reply:
    """Transfer the customer to a human agent, ending this conversation. Only when the
    request cannot be handled with the other tools.

    Args:
        summary: what the customer wants and what was done so far, for the human agent.
    """
    return Reply("Transferred to a human agent.", done=True, outcome="transfer")


#: Every tool by name, as the verifier replays a task's reference.
TOOLS: dict[str, Any] = {f.__name__: f for f in (
    find_customer_by_email, find_customer_by_name_zip, get_customer, get_order, get_item, list_product_variants,
    cancel_order, return_items, exchange_items, modify_order_address, transfer_to_human)}


def _dollars(cents: int) -> str:
    return f"${cents / 100:.2f}"


def _item(row: Any) -> dict[str, Any]:
    return {"item_id": row[0], "product": row[1], "options": row[2], "price": _dollars(row[3]),
            "available": bool(row[4])}


def _order(db: sqlite3.Connection, order_id: str) -> dict[str, Any]:
    key = order_id.strip() if order_id.strip().startswith("#") else "#" + order_id.strip()
    cursor = db.execute("SELECT id, customer_id, status, payment_method_id, address1, city, state, zip "
                        "FROM orders WHERE id = ?", (key,))
    row = cursor.fetchone()
    if row is None:
        raise ToolError(f"no order {order_id!r}")
    return dict(zip([c[0] for c in cursor.description], row, strict=True))


def _total(db: sqlite3.Connection, order_id: str) -> int:
    return int(db.execute("SELECT SUM(i.price_cents) FROM order_items oi JOIN items i ON i.id = oi.item_id "
                          "WHERE oi.order_id = ?", (order_id,)).fetchone()[0])


def _delivered(order: dict[str, Any], what: str) -> None:
    if order["status"] != "delivered":
        raise ToolError(f"order {order['id']} is {order['status']}; only delivered orders' items can be {what}")


def _lines(db: sqlite3.Connection, order_id: str, item_ids: list[str]) -> list[tuple[int, int]]:
    """(line, price) of one not yet returned or exchanged line per item id, in order."""
    if not item_ids:
        raise ToolError("give at least one item id")
    taken: list[tuple[int, int]] = []
    for item_id in item_ids:
        placeholders = ",".join("?" * len(taken))  # the lines already taken by an earlier id of the list
        row = db.execute("SELECT oi.line, i.price_cents FROM order_items oi JOIN items i ON i.id = oi.item_id "
                         "WHERE oi.order_id = ? AND oi.item_id = ? AND oi.status = 'ordered' "
                         f"AND oi.line NOT IN ({placeholders}) ORDER BY oi.line",
                         (order_id, str(item_id), *[line for line, _ in taken])).fetchone()
        if row is None:
            raise ToolError(f"order {order_id} has no item {item_id!r} that can still be returned or exchanged")
        taken.append((int(row[0]), int(row[1])))
    return taken


def _own_method(db: sqlite3.Connection, order: dict[str, Any], method: str) -> None:
    row = db.execute("SELECT 1 FROM payment_methods WHERE id = ? AND customer_id = ?",
                     (method, order["customer_id"])).fetchone()
    if row is None:
        raise ToolError(f"the customer has no payment method {method!r}")


def _refund_method(db: sqlite3.Connection, order: dict[str, Any], method: str) -> None:
    _own_method(db, order, method)
    kind = db.execute("SELECT kind FROM payment_methods WHERE id = ?", (method,)).fetchone()[0]
    if method != order["payment_method_id"] and kind != "gift card":
        raise ToolError("a refund goes to the order's payment method or to one of the customer's gift cards")
