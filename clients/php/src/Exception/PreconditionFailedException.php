<?php

declare(strict_types=1);

namespace Queen\Exception;

/**
 * A required KV op lost (status 200, code kv_precondition): which op
 * (failedIndex), why (kvReason: exists, absent, version, limit, type), and
 * the key's live version and value (value null and valueOmitted true when
 * the broker left a large one out; valueBytes says how large).
 */
class PreconditionFailedException extends QueenException
{
    /** clients/API.md's error kind. */
    public const KIND = 'precondition';

    public function __construct(
        public readonly int $failedIndex,
        public readonly string $kvReason,
        public readonly int|\Queen\Number $version,
        public readonly mixed $value,
        public readonly bool $valueOmitted,
        public readonly int $valueBytes,
        int $attempts = 1,
    ) {
        parent::__construct(200, 'kv_precondition', 'kv_precondition', "a required op lost: $kvReason", 0, $attempts);
        // clients/API.md's one wording, whatever the language.
        $this->message = "kv precondition failed at op $failedIndex: $kvReason";
    }

    public function toArray(): array
    {
        $a = parent::toArray() + ['failedIndex' => $this->failedIndex, 'kvReason' => $this->kvReason, 'version' => $this->version];
        if ($this->valueOmitted) {
            return $a + ['valueOmitted' => true, 'valueBytes' => $this->valueBytes];
        }
        return $a + ['value' => $this->value];
    }
}
